"""Approvals and child work: ``list_approvals`` and ``decide_approval`` in memory, and against a
real ``openbot serve`` a registered HTTP tool with an ``ask`` rule, decided through the SDK."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import openbot_platform as openbot
from conftest import Server, Target, connect_async, connect_sync, run

UNKNOWN = "019ad1c8-0000-7000-8000-000000000000"

# --- in memory -------------------------------------------------------------------------------


def test_in_memory_list_approvals_is_empty(memory: Target) -> None:
    with connect_sync(memory) as client:
        assert list(client.list_approvals()) == []
        assert list(client.list_approvals("pending")) == []


def test_in_memory_deciding_an_unknown_request_raises_not_found(memory: Target) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(openbot.NotFoundError) as raised:
            client.decide_approval(UNKNOWN, "approve")
    assert raised.value.code == "not_found"


def test_the_async_client_lists_and_decides_approvals_like_the_blocking_one(memory: Target) -> None:
    async def body() -> None:
        async with await connect_async(memory) as client:
            assert await client.list_approvals(state="pending") == []
            with pytest.raises(openbot.NotFoundError):
                await client.decide_approval(UNKNOWN, "deny", reason="no")

    run(body())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: c.list_approvals("maybe"), "invalid `state` of list_approvals"),
        (lambda c: c.list_approvals(1), "invalid `state` of list_approvals"),
        (lambda c: c.decide_approval(UNKNOWN, "perhaps"), "expected `approve` or `deny`"),
        (lambda c: c.decide_approval("not-an-id", "deny"), "not a valid `id` for decide_approval"),
    ],
)
def test_an_unknown_approval_state_decision_or_id_raises_invalid_input(
    memory: Target, call: Any, message: str
) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(openbot.InvalidInputError, match=message):
            call(client)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: c.decide_approval(7, "deny"), "expected an ApprovalRequest or an approval request ID"),
        (lambda c: c.decide_approval(UNKNOWN, True), "decision must be a str"),
        (lambda c: c.decide_approval(UNKNOWN, "deny", reason=3), "reason must be a str"),
    ],
)
def test_a_wrong_argument_type_of_the_approval_calls_raises_type_error(
    memory: Target, call: Any, message: str
) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(TypeError, match=message):
            call(client)


# --- against a server ------------------------------------------------------------------------


@dataclass
class Endpoint:
    """A local HTTP endpoint standing for a write to the world: it records every call."""

    url: str
    calls: list[Any] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    calls: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(json.loads(body or b"null"))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"paid")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield Endpoint(url=f"http://127.0.0.1:{http.server_address[1]}/pay", calls=calls)
    finally:
        http.shutdown()
        http.server_close()


def api(server: Server, method: str, path: str, body: Any) -> Any:
    """A request to the server's HTTP API with the admin token; returns the JSON answer."""
    request = urllib.request.Request(
        f"{server.url}{path}",
        method=method,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


_tools = itertools.count(1)


def paying_bot(client: openbot.Client, server: Server, endpoint: Endpoint, script: Any) -> tuple[openbot.Bot, str]:
    """Registers the endpoint as an HTTP tool under a fresh name with an ``ask`` rule; returns
    a Bot whose model calls it once and then answers, and the tool's name."""
    tool = f"pay_py_{next(_tools)}"
    api(server, "PUT", f"/v1/tools/{tool}", {
        "description": "Pays an amount.",
        "input_schema": {"type": "object"},
        "url": endpoint.url,
    })
    api(server, "POST", "/v1/approval-rules", {"tool": tool, "action": "ask"})
    model = script([
        {"tool_calls": [{"id": "call_1", "name": tool, "arguments": {"amount": 5}}]},
        {"text": "I asked for approval."},
    ])
    bot = client.create_bot(name="Payer", model=model, tools=[{"name": tool, "input_schema": {"type": "object"}}])
    return bot, tool


@dataclass
class Asked:
    chat: openbot.Chat
    events: list[openbot.Event]
    requested: openbot.Event
    child: openbot.Event


def ask_for_payment(client: openbot.Client, bot: openbot.Bot) -> Asked:
    """Sends input to a new Chat of ``bot``; returns the Turn's events (to its end) and its
    ``approval_requested`` and ``child_started`` events."""
    chat = client.create_chat(bot)
    events = list(client.observe(client.send(chat, "Pay 5")))
    types = [e.type for e in events]
    requested = next((e for e in events if e.type == "approval_requested"), None)
    child = next((e for e in events if e.type == "child_started"), None)
    assert requested is not None, f"no approval_requested event in {types}"
    assert child is not None, f"no child_started event in {types}"
    return Asked(chat, events, requested, child)


def pending_of(client: openbot.Client, tool: str) -> list[openbot.ApprovalRequest]:
    return [r for r in client.list_approvals("pending") if r.call.name == tool]


def test_an_approved_call_runs_once_in_a_child_tool_job_that_ends_with_job_ended(
    server: Server, endpoint: Endpoint, script: Any
) -> None:
    with openbot.connect_sync(server.url, token=server.token) as client:
        bot, tool = paying_bot(client, server, endpoint, script)
        asked = ask_for_payment(client, bot)
        assert asked.events[-1].type == "turn_ended", "the Turn ends while approval waits"
        call = asked.requested.requested_call
        assert call is not None and call.name == tool and call.arguments == {"amount": 5}
        assert asked.child.data["call_id"] == call.id and asked.child.data["kind"] == "tool_job"
        assert endpoint.calls == [], "nothing runs before the decision"

        [request] = pending_of(client, tool)
        assert request.id == asked.requested.request_id
        assert request.is_pending and request.execution_id == asked.child.child_id
        assert request.bot_id == bot.id and request.chat_id == asked.chat.id

        decided = client.decide_approval(request, "approve", reason="fine")
        assert decided.state == "approved" and decided.reason == "fine" and decided.decided_at is not None

        assert asked.child.child_id is not None
        job_events = list(client.observe(asked.child.child_id))
        assert job_events[-1].type == "job_ended" and job_events[-1].is_terminal
        assert job_events[-1].state == "completed"
        job = client.get_execution(asked.child.child_id)
        assert (job.kind, job.state) == ("tool_job", "completed")
        assert endpoint.calls == [{"amount": 5}], "the approved call ran exactly once"
        assert pending_of(client, tool) == []


def test_an_approved_calls_result_reaches_the_chat_as_a_notice_from_its_child(
    server: Server, endpoint: Endpoint, script: Any
) -> None:
    with openbot.connect_sync(server.url, token=server.token) as setup:
        bot, tool = paying_bot(setup, server, endpoint, script)
        asked = ask_for_payment(setup, bot)
    child = asked.child.child_id
    assert child is not None

    async def body() -> list[str]:
        async with await openbot.connect(server.url, token=server.token) as client:
            [request] = [r for r in await client.list_approvals("pending") if r.call.name == tool]
            await client.decide_approval(request.id, "approve")
            await client.wait(child)
            return [e.text for e in await client.history(asked.chat) if e.execution_id == child]

    notices = run(body())
    assert any(f"`{tool}`" in text and "finished" in text and "paid" in text for text in notices), notices
    assert len(endpoint.calls) == 1


def test_a_denied_call_never_reaches_its_endpoint_and_its_child_job_ends_cancelled(
    server: Server, endpoint: Endpoint, script: Any
) -> None:
    with openbot.connect_sync(server.url, token=server.token) as client:
        bot, _ = paying_bot(client, server, endpoint, script)
        asked = ask_for_payment(client, bot)
        assert asked.requested.request_id is not None and asked.child.child_id is not None
        decided = client.decide_approval(asked.requested.request_id, "deny", "too much")
        assert (decided.state, decided.reason) == ("denied", "too much")
        job_events = list(client.observe(asked.child.child_id))
        assert (job_events[-1].type, job_events[-1].state) == ("job_ended", "cancelled")
        assert client.get_execution(asked.child.child_id).state == "cancelled"
        assert endpoint.calls == [], "a denied call never runs"


def test_deciding_a_request_twice_raises_conflict(server: Server, endpoint: Endpoint, script: Any) -> None:
    with openbot.connect_sync(server.url, token=server.token) as client:
        bot, _ = paying_bot(client, server, endpoint, script)
        request_id = ask_for_payment(client, bot).requested.request_id
        assert request_id is not None
        client.decide_approval(request_id, "deny")
        with pytest.raises(openbot.ConflictError):
            client.decide_approval(request_id, "approve")
        assert endpoint.calls == []
