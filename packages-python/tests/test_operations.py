"""Every operation of the API is a method of both clients, and every generated method is an
operation: read against schema/openapi.json at test time, so an operation added to the server
without running scripts/generate-sdk fails here (and `scripts/generate-sdk --check` in CI)."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

import openbot_platform as openbot
from openbot_platform import _operations
from conftest import REPO, Target, connect_async, connect_sync, run

DOCUMENT: dict[str, Any] = json.loads((REPO / "schema" / "openapi.json").read_text())
OPERATION_IDS = sorted(
    op["operationId"] for methods in DOCUMENT["paths"].values() for op in methods.values()
)


def test_every_operation_of_the_schema_has_a_method_in_both_clients() -> None:
    assert sorted(openbot.OPERATIONS) == OPERATION_IDS
    for op, name in openbot.OPERATIONS.items():
        async_method = getattr(openbot.AsyncClient, name, None)
        sync_method = getattr(openbot.Client, name, None)
        assert callable(async_method) and callable(sync_method), f"{op}: no method {name}"


def test_every_generated_method_is_an_operation_of_the_schema() -> None:
    for cls in (_operations.AsyncOperations, _operations.SyncOperations):
        defined = {name for name, value in vars(cls).items() if inspect.isfunction(value)}
        assert defined == set(openbot.METHODS), cls.__name__
    assert set(openbot.METHODS.values()) <= set(OPERATION_IDS)


def test_an_async_method_is_a_coroutine_and_a_blocking_one_is_not() -> None:
    for name, op in openbot.METHODS.items():
        paged_iterator = name == openbot.OPERATIONS[op] and not name.endswith("_page") and any(
            other == f"{name}_page" for other in openbot.METHODS
        )
        assert inspect.iscoroutinefunction(getattr(_operations.AsyncOperations, name)) != paged_iterator, name
        assert not inspect.iscoroutinefunction(getattr(_operations.SyncOperations, name)), name


def test_the_generic_call_path_answers_an_unknown_operation_with_invalid_input(memory: Target) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(openbot.InvalidInputError, match="not an operation of the API") as raised:
            client._call_op("no_such_operation", {})
        assert raised.value.code == "invalid_input"


def test_in_memory_an_operation_only_a_server_has_raises_invalid_input_that_says_so(memory: Target) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(openbot.InvalidInputError, match="needs an OpenBot server"):
            client.list_tokens()

    async def body() -> None:
        async with await connect_async(memory) as client:
            with pytest.raises(openbot.InvalidInputError, match="needs an OpenBot server"):
                await client.list_members()

    run(body())


def test_an_error_of_a_generated_method_has_its_code_category_and_error_id(target: Target) -> None:
    with connect_sync(target) as client:
        with pytest.raises(openbot.OpenBotError) as raised:
            client.get_approval("not-a-uuid")
        error = raised.value
        assert error.code in ("invalid_input", "not_found")
        assert hasattr(error, "category") and hasattr(error, "error_id")


def test_the_manual_names_every_operations_method() -> None:
    manual = (REPO / "docs" / "sdk-python.md").read_text()
    missing = [name for name in openbot.OPERATIONS.values() if f"`{name}`" not in manual]
    assert missing == []


@pytest.fixture
def remote(server: Any) -> Target:
    return Target("remote", server.url, server.token)


def test_a_token_is_created_listed_and_revoked_through_generated_methods(remote: Target) -> None:
    with connect_sync(remote) as client:
        created = client.create_token(name="py-read", rights=[openbot.Right(resource="bots", action="read")])
        assert isinstance(created, openbot.CreatedToken) and created.secret
        assert created.token.id in [token.id for token in client.list_tokens()]
        client.revoke_token(created.token)
        with openbot.connect_sync(remote.uri, token=created.secret) as revoked:
            with pytest.raises(openbot.UnauthorizedError):
                revoked.list_bots()


def test_a_file_is_uploaded_as_bytes_and_read_back_with_its_media_type(target: Target) -> None:
    async def body() -> None:
        async with await connect_async(target) as client:
            stored = await client.upload_file(name="a.bin", data=bytes(range(256)), content_type="application/octet-stream")
            assert (stored.name, stored.size) == ("a.bin", 256)
            content = await client.file_content(stored)
            assert content.data == bytes(range(256)) and content.content_type.startswith("application/octet-stream")
            await client.delete_file(stored.id)
            with pytest.raises(openbot.NotFoundError):
                await client.get_file(stored)

    run(body())


def test_a_budget_takes_a_bot_handle_as_its_target(remote: Target, script: Any) -> None:
    with connect_sync(remote) as client:
        bot = client.create_bot(name="Capped", model=script([{"text": "hi"}]), tools=[])
        budget = client.put_budget("bot", bot, max_cost_micros=5_000)
        assert (budget.scope, budget.target_id, budget.max_cost_micros) == ("bot", bot.id, 5_000)
        assert any(b.target_id == bot.id for b in client.list_budgets())
        client.delete_budget("bot", bot)
        assert not any(b.target_id == bot.id for b in client.list_budgets())


def test_an_http_tool_is_registered_with_its_schema_and_removed(target: Target) -> None:
    with connect_sync(target) as client:
        schema = {"type": "object", "properties": {"q": {"type": "string"}}}
        tool = client.put_tool("lookup_py", url="https://example.com/lookup", input_schema=schema,
                               description="Looks up.")
        assert (tool.name, tool.input_schema, tool.retry_safe) == ("lookup_py", schema, False)
        assert "lookup_py" in [t.name for t in client.list_tools()]
        client.delete_tool("lookup_py")
        assert "lookup_py" not in [t.name for t in client.list_tools()]


def test_in_memory_an_http_tool_on_loopback_needs_the_outbound_allow_list(memory: Target) -> None:
    local = {"url": "http://127.0.0.1:9/lookup", "input_schema": {"type": "object"}}
    with connect_sync(memory) as client:
        with pytest.raises(openbot.InvalidInputError):
            client.put_tool("local", **local)
    with connect_sync(memory, outbound="loopback") as client:
        assert client.put_tool("local", **local).name == "local"

    async def body() -> None:
        async with await connect_async(memory, outbound="loopback") as client:
            assert (await client.put_tool("local", **local)).name == "local"

    run(body())


def test_an_outbound_allow_list_that_does_not_parse_is_invalid_input(memory: Target) -> None:
    with pytest.raises(openbot.InvalidInputError, match="outbound"):
        connect_sync(memory, outbound="10.0.0.0/99")


def test_a_public_operation_answers_the_nodes_health(remote: Target) -> None:
    with connect_sync(remote) as client:
        assert client.health() == openbot.Health(status="ok")
