"""The shared SDK scenarios (tests/scenarios/*.json), in both modes, with both the blocking and
the asyncio client. The format is described in tests/scenarios/README.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import openbot_platform as openbot
from conftest import SCENARIOS, Target, connect_async, connect_sync, run

SCENARIO_FILES = sorted(SCENARIOS.glob("*.json"))


def sum_tool(a: int, b: int) -> str:
    return str(a + b)


def fail_tool(**_: Any) -> str:
    raise RuntimeError("tool failed on purpose")


BEHAVIOURS = {"sum": sum_tool, "fail": fail_tool}


def load(path: Path, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scenario and the Bot spec it names, with the script written to a fresh file."""
    scenario = json.loads(path.read_text())
    script = tmp_path / f"{path.stem}-script.json"
    script.write_text(json.dumps(scenario["script"]))
    spec = dict(scenario["bot"])
    spec["model"] = f"scripted:{script.resolve()}"
    return scenario, spec


def tools_of(scenario: dict[str, Any]) -> dict[str, Any]:
    return {name: BEHAVIOURS[kind] for name, kind in scenario["tools"].items()}


def check_turn(expect: dict[str, Any], events: list[openbot.Event]) -> None:
    types: list[str] = []
    for event in events:
        if event.type == "text_delta" and types and types[-1] == "text_delta":
            continue
        types.append(event.type)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    ended = [e for e in events if e.type == "turn_ended"]
    if "outcome" in expect:
        assert ended and ended[-1].outcome == expect["outcome"], events[-1]
    if "events" in expect:
        assert types == expect["events"]
    if "reply" in expect:
        steps = [e for e in events if e.type == "model_step_started"]
        last = (steps[-1].data["step"], steps[-1].data["attempt"]) if steps else None
        reply = "".join(
            e.text or ""
            for e in events
            if e.type == "text_delta" and (e.data["step"], e.data["attempt"]) == last
        )
        assert reply == expect["reply"]
    if "tool_results" in expect:
        results = [e.tool_result for e in events if e.type == "tool_result"]
        assert len(results) == len(expect["tool_results"])
        for result, wanted in zip(results, expect["tool_results"]):
            assert result is not None
            assert result.name == wanted["name"]
            assert result.is_error == wanted["is_error"]
            if "text" in wanted:
                assert result.text == wanted["text"]


ERROR_CLASSES = openbot.ERRORS_BY_CODE


def check_error(call: Any, code: str) -> None:
    with pytest.raises(openbot.OpenBotError) as raised:
        call()
    assert raised.value.code == code
    assert isinstance(raised.value, ERROR_CLASSES[code])


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_scenario_with_the_blocking_client(path: Path, target: Target, tmp_path: Path) -> None:
    scenario, spec = load(path, tmp_path)
    with connect_sync(target, tools=tools_of(scenario)) as client:
        bot = client.create_bot(**spec)
        chat = client.create_chat(bot)
        for turn in scenario["turns"]:
            receipt = client.send(chat, turn["send"])
            events = list(client.observe(receipt))
            check_turn(turn["expect"], events)
        assert len(list(client.history(chat))) == scenario["history"]
        for case in scenario["errors"]:
            op = case["op"]
            if op == "create_bot":
                check_error(lambda: client.create_bot(**case["spec"]), case["code"])
            else:
                method = getattr(client, op)
                check_error(lambda: method(case["id"]), case["code"])


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_scenario_with_the_async_client(path: Path, target: Target, tmp_path: Path) -> None:
    scenario, spec = load(path, tmp_path)

    async def body() -> None:
        async with await connect_async(target, tools=tools_of(scenario)) as client:
            bot = await client.create_bot(**spec)
            chat = await client.create_chat(bot)
            for turn in scenario["turns"]:
                receipt = await client.send(chat, turn["send"])
                events = [e async for e in await client.observe(receipt)]
                check_turn(turn["expect"], events)
            assert len(await client.history(chat)) == scenario["history"]
            for case in scenario["errors"]:
                with pytest.raises(openbot.OpenBotError) as raised:
                    if case["op"] == "create_bot":
                        await client.create_bot(**case["spec"])
                    else:
                        await getattr(client, case["op"])(case["id"])
                assert raised.value.code == case["code"]
                assert isinstance(raised.value, ERROR_CLASSES[case["code"]])

    run(body())
