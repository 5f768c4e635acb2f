"""Paged lists: the generated `<list>` iterator reads page after page with the same filters and
page size, following `next_cursor` until a page has none; `<list>_page` reads one page. Checked
on list_unknown_outcomes (the paged list of today) with a caller that answers three pages."""

from __future__ import annotations

from typing import Any

from openbot_platform import _operations
from conftest import run

OUTCOME = {
    "execution_id": "e", "kind": "turn", "step": 1, "attempt": 1, "tool_call":
    {"id": "c", "name": "pay", "arguments": {}}, "idempotency_key": "k",
    "waiting_since": "2026-01-01T00:00:00Z",
}
PAGES = {None: (["1", "2"], "after-2"), "after-2": (["3", "4"], "after-4"), "after-4": (["5"], None)}


def answer(params: dict[str, Any]) -> dict[str, Any]:
    calls, cursor = PAGES[params.get("cursor")]
    items = [{**OUTCOME, "call": call} for call in calls]
    page: dict[str, Any] = {"items": items, "outcomes": items}
    if cursor is not None:
        page["next_cursor"] = cursor
    return page


class Sync(_operations.SyncOperations):
    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def _call_op(self, op: str, params: Any, body: Any = None, content_type: Any = None) -> Any:
        assert op == "list_unknown_outcomes"
        self.asked.append(dict(params))
        return answer(params)


class Async(_operations.AsyncOperations):
    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def _call_op(self, op: str, params: Any, body: Any = None, content_type: Any = None) -> Any:
        self.asked.append(dict(params))
        return answer(params)


def test_the_iterator_reads_every_page_with_the_same_page_size() -> None:
    client = Sync()
    assert [o.call for o in client.list_unknown_outcomes(limit=2)] == ["1", "2", "3", "4", "5"]
    assert client.asked == [
        {"limit": 2, "cursor": None}, {"limit": 2, "cursor": "after-2"}, {"limit": 2, "cursor": "after-4"},
    ]


def test_the_iterator_starts_at_the_cursor_it_is_given() -> None:
    client = Sync()
    assert [o.call for o in client.list_unknown_outcomes(cursor="after-4")] == ["5"]


def test_a_page_is_read_alone_with_its_next_cursor() -> None:
    client = Sync()
    page = client.list_unknown_outcomes_page(limit=2)
    assert page.next_cursor == "after-2" and len(client.asked) == 1


def test_the_async_iterator_reads_every_page_and_awaited_gives_them_all() -> None:
    async def body() -> None:
        client = Async()
        assert [o.call async for o in client.list_unknown_outcomes(limit=2)] == ["1", "2", "3", "4", "5"]
        assert [o.call for o in await client.list_unknown_outcomes()] == ["1", "2", "3", "4", "5"]
        assert len(client.asked) == 6

    run(body())
