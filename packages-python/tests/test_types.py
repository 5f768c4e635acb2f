"""The Python data classes and constants against the shared schema (schema/openapi.json, which
the server's routes generate), so a field added to the schema cannot be silently missed here."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

import openbot
from openbot import types
from conftest import REPO

SCHEMAS: dict[str, Any] = json.loads((REPO / "schema" / "openapi.json").read_text())["components"][
    "schemas"
]


def properties(name: str) -> set[str]:
    return set(SCHEMAS[name]["properties"])


@pytest.mark.parametrize(
    "cls, schema",
    [
        (openbot.Chat, "Chat"),
        (openbot.Execution, "Execution"),
        (openbot.Usage, "Usage"),
        (openbot.ToolResult, "ToolResult"),
        (openbot.ToolCall, "ToolCall"),
        (openbot.ToolDefinition, "ToolDefinition"),
        (openbot.Limits, "Limits"),
        (openbot.SendReceipt, "SendReceipt"),
        (openbot.ApprovalRequest, "ApprovalRequest"),
        (openbot.UnknownOutcome, "UnknownOutcome"),
        (openbot.UnknownOutcomePage, "UnknownOutcomePage"),
        (openbot.OutcomeDecisionRecord, "OutcomeDecisionRecord"),
    ],
)
def test_a_data_class_has_exactly_the_schemas_fields(cls: type, schema: str) -> None:
    assert {f.name for f in dataclasses.fields(cls)} == properties(schema)


def test_a_bot_has_the_fields_of_the_bot_and_its_spec() -> None:
    expected = (properties("Bot") - {"spec"}) | properties("BotSpec")
    assert {f.name for f in dataclasses.fields(openbot.Bot)} == expected


def test_a_chat_entry_keeps_every_field_of_the_schema() -> None:
    fields = {f.name for f in dataclasses.fields(openbot.ChatEntry)}
    assert properties("ChatEntry") <= fields


def test_every_error_code_has_its_exception_class() -> None:
    assert set(openbot.ERRORS_BY_CODE) == set(SCHEMAS["ErrorCode"]["enum"])
    for code, cls in openbot.ERRORS_BY_CODE.items():
        assert issubclass(cls, openbot.OpenBotError) and cls is not openbot.OpenBotError, code


def test_the_event_types_are_the_schemas() -> None:
    kinds = [k["properties"]["type"]["enum"][0] for k in SCHEMAS["EventKind"]["oneOf"]]
    assert list(types.EVENT_TYPES) == kinds


def test_the_terminal_states_are_the_schemas_end_states() -> None:
    states = SCHEMAS["ExecutionState"]["enum"]
    assert types.TERMINAL_STATES == set(states[-4:])


def test_the_terminal_event_types_are_the_schemas_last_events() -> None:
    kinds = [k["properties"]["type"]["enum"][0] for k in SCHEMAS["EventKind"]["oneOf"]]
    ends = {kind for kind in kinds if kind.endswith("_ended") or kind == "failed"}
    assert types.TERMINAL_EVENT_TYPES == ends == {"turn_ended", "job_ended", "failed"}


@pytest.mark.parametrize(
    "alias, schema",
    [("ApprovalState", "ApprovalState"), ("Decision", "Decision"), ("OutcomeDecision", "OutcomeDecision")],
)
def test_a_literal_alias_has_exactly_the_schemas_values(alias: str, schema: str) -> None:
    values = [value for literal in typing.get_args(getattr(openbot, alias)) for value in typing.get_args(literal)]
    assert values == SCHEMAS[schema]["enum"]
