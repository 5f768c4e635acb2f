"""Pausing and plan mode: refused (pause) and off (plan mode) in memory; against a real
``openbot serve``, plan mode set and read back, and a Turn paused, resumed and completed."""

from __future__ import annotations

from typing import Any

import pytest

import openbot_platform as openbot
from conftest import Server, Target, connect_async, connect_sync, run


def test_in_memory_pausing_is_invalid_input_and_plan_mode_is_off(memory: Target, script: Any) -> None:
    with connect_sync(memory) as client:
        bot = client.create_bot(name="Local", model=script([{"text": "ok"}]))
        chat = client.create_chat(bot)
        assert client.plan_mode(chat) is False
        with pytest.raises(openbot.InvalidInputError):
            client.set_plan_mode(chat, True)
        receipt = client.send(chat, "Hi")
        client.wait(receipt)
        with pytest.raises(openbot.InvalidInputError) as raised:
            client.pause_execution(receipt)
        assert raised.value.code == "invalid_input"
        with pytest.raises(openbot.InvalidInputError):
            client.resume_execution(receipt.execution_id)
        with pytest.raises(TypeError, match="enabled must be a bool"):
            client.set_plan_mode(chat, 1)  # type: ignore[arg-type]


def test_plan_mode_is_set_read_back_and_turned_off(server: Server, script: Any) -> None:
    async def body() -> None:
        async with await connect_async(Target("remote", server.url, server.token)) as client:
            bot = await client.create_bot(name="Planner", model=script([{"text": "ok"}]))
            chat = await client.create_chat(bot)
            assert await client.plan_mode(chat) is False
            assert await client.set_plan_mode(chat, True) is True
            assert await client.plan_mode(chat.id) is True
            assert await client.set_plan_mode(chat, False) is False
            assert await client.plan_mode(chat) is False

    run(body())


def test_a_paused_turn_resumes_and_completes(server: Server, script: Any) -> None:
    with openbot.connect_sync(server.url, token=server.token) as client:
        bot = client.create_bot(name="Pausable", model=script([{"text": "ok", "delay_ms": 300}]))
        receipt = client.send(client.create_chat(bot), "Hi")
        assert client.pause_execution(receipt).id == receipt.execution_id
        assert client.resume_execution(receipt).id == receipt.execution_id
        assert client.wait(receipt).state == "completed"
