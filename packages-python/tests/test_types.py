"""The Python data classes and constants against the shared schema (schema/openapi.json, which
the server's routes generate), so a field added to the schema cannot be silently missed here."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

import openbot_platform as openbot
from openbot_platform import types
from conftest import REPO

SCHEMAS: dict[str, Any] = json.loads((REPO / "schema" / "openapi.json").read_text())["components"][
    "schemas"
]


def properties(name: str) -> set[str]:
    return set(SCHEMAS[name]["properties"])


OBJECTS = [name for name, schema in SCHEMAS.items() if schema.get("type") == "object"]
ENUMS = [name for name, schema in SCHEMAS.items() if "enum" in schema]


def test_every_schema_component_is_a_type_of_the_package() -> None:
    missing = [name for name in SCHEMAS if not hasattr(types, name)]
    assert missing == []


@pytest.mark.parametrize("name", OBJECTS)
def test_a_data_class_has_exactly_the_schemas_fields(name: str) -> None:
    cls = getattr(openbot, name)
    assert {f.name for f in dataclasses.fields(cls)} == properties(name)


@pytest.mark.parametrize("name", OBJECTS)
def test_a_data_class_requires_exactly_the_schemas_required_fields(name: str) -> None:
    cls = getattr(openbot, name)
    without_default = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert without_default == set(SCHEMAS[name].get("required", []))


@pytest.mark.parametrize("name", ENUMS)
def test_an_enum_is_a_literal_alias_of_exactly_the_schemas_values(name: str) -> None:
    alias = getattr(openbot, name)
    values = [value for literal in typing.get_args(alias) for value in typing.get_args(literal)]
    assert values == SCHEMAS[name]["enum"]


def test_a_type_reads_its_json_and_writes_it_back() -> None:
    data = {
        "id": "019ad1c8-0000-7000-8000-000000000000",
        "revision": 2,
        "created_at": "2026-01-02T03:04:05.123456789Z",
        "spec": {"name": "A", "model": "scripted:x.json", "limits": {"max_steps": 3},
                 "tools": [{"name": "add", "input_schema": {"type": "object"}}]},
    }
    bot = openbot.Bot.from_dict(data)
    assert bot.created_at.year == 2026 and bot.created_at.microsecond == 123456
    assert bot.spec.limits == openbot.Limits(max_steps=3)
    assert bot.name == "A" and bot.tools[0].name == "add"
    written = bot.to_dict()
    assert written["spec"] == data["spec"] and written["revision"] == 2
    assert openbot.Bot.from_dict(written) == bot


def test_a_bot_reads_its_spec_as_its_own_fields() -> None:
    bot = openbot.Bot.from_dict({"id": "b", "revision": 0, "created_at": "2026-01-01T00:00:00Z",
                                 "spec": {"name": "N", "model": "m:x"}})
    assert (bot.name, bot.model, bot.instructions, bot.tools, bot.shared) == ("N", "m:x", "", [], False)


def test_an_event_keeps_its_kinds_fields_in_data() -> None:
    event = openbot.Event.from_dict({"execution_id": "e", "sequence": 3, "at": "2026-01-01T00:00:00Z",
                                     "type": "text_delta", "step": 1, "attempt": 1, "text": "hi"})
    assert (event.type, event.data, event.text, event.step) == ("text_delta", {"step": 1, "attempt": 1, "text": "hi"}, "hi", 1)
    assert event.to_dict()["text"] == "hi" and event.to_dict()["type"] == "text_delta"
    assert event == openbot.Event.from_dict({**event.to_dict(), "text": "other"}), "an event is its execution and sequence"


def test_every_error_code_has_its_exception_class() -> None:
    assert set(openbot.ERRORS_BY_CODE) == set(SCHEMAS["ErrorCode"]["enum"])
    for code, cls in openbot.ERRORS_BY_CODE.items():
        assert issubclass(cls, openbot.OpenBotError) and cls is not openbot.OpenBotError, code


def test_the_event_types_are_the_schemas() -> None:
    kinds = [k["properties"]["type"]["enum"][0] for k in SCHEMAS["EventKind"]["oneOf"]]
    assert list(types.EVENT_TYPES) == kinds


def test_the_terminal_states_are_the_schemas_end_states() -> None:
    states = SCHEMAS["ExecutionState"]["enum"]
    assert openbot.TERMINAL_STATES == set(states[-4:])


def test_the_terminal_event_types_are_the_schemas_last_events() -> None:
    kinds = [k["properties"]["type"]["enum"][0] for k in SCHEMAS["EventKind"]["oneOf"]]
    ends = {kind for kind in kinds if kind.endswith("_ended") or kind == "failed"}
    assert openbot.TERMINAL_EVENT_TYPES == ends == {"turn_ended", "job_ended", "failed"}
