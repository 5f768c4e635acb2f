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
