"""Handles (`bot.create_chat()`, `chat.send()`, `turn.events()`, `turn.wait()`), a tool function
given once (at `connect`), and `async for` over `observe` without a second `await`: both
clients, both modes."""

from __future__ import annotations

from typing import Any

import openbot_platform as openbot
from conftest import Target, connect_async, connect_sync, run


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def adder_script(script: Any) -> str:
    return script([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
                   {"deltas": ["2 + 3 ", "= 5"]}])


def test_a_turn_waited_for_through_handles_gives_its_end_with_its_text(target: Target, script: Any) -> None:
    with connect_sync(target, tools=[add]) as client:
        bot = client.create_bot(name="Adder", model=adder_script(script))
        assert isinstance(bot, openbot.Bot) and isinstance(bot, openbot.BotHandle)
        chat = bot.create_chat()
        assert isinstance(chat, openbot.ChatHandle) and chat.bot_id == bot.id
        turn = chat.send("What is 2 + 3?")
        end = turn.wait()
        assert isinstance(end, openbot.TurnEnd) and isinstance(end, openbot.Execution)
        assert (end.state, end.outcome, end.text) == ("completed", "completed", "2 + 3 = 5")
        assert [entry.role for entry in chat.history()] == ["user", "assistant", "tool", "assistant"]


def test_a_tool_given_at_connect_is_the_bots_without_naming_it_again(target: Target, script: Any) -> None:
    with connect_sync(target, tools={"add": add}) as client:
        bot = client.create_bot(name="Adder", model=adder_script(script))
        assert [tool.name for tool in bot.tools] == ["add"]
        assert bot.tools[0].input_schema["required"] == ["a", "b"]
        named = client.create_bot(name="Named", model=adder_script(script), tools=["add"])
        assert [tool.name for tool in named.tools] == ["add"]
        results = [e.tool_result.text for e in bot.create_chat().send("2 + 3?").events()
                   if e.tool_result is not None]
        assert results == ["5"]


def test_a_tool_name_that_was_not_given_to_connect_raises_value_error(memory: Target) -> None:
    with connect_sync(memory, tools=[add]) as client:
        try:
            client.create_bot(name="X", model="scripted:x.json", tools=["mul"])
        except ValueError as error:
            assert "mul" in str(error) and "add" in str(error)
        else:
            raise AssertionError("no ValueError")


def test_the_async_handles_read_like_the_blocking_ones(target: Target, script: Any) -> None:
    async def body() -> None:
        async with await connect_async(target, tools=[add]) as client:
            bot = await client.create_bot(name="Adder", model=adder_script(script))
            assert isinstance(bot, openbot.AsyncBotHandle)
            chat = await bot.create_chat()
            turn = await chat.send("What is 2 + 3?")
            assert isinstance(turn, openbot.AsyncTurn) and turn.id == turn.execution_id
            kinds = [event.type async for event in turn.events()]
            assert kinds[0] == "turn_started" and kinds[-1] == "turn_ended"
            end = await turn.wait()
            assert end.text == "2 + 3 = 5" and end.state == "completed"
            assert len(await chat.history()) == 4
            renamed = await bot.update(name="Summer")
            assert renamed.name == "Summer" and renamed.revision == bot.revision + 1

    run(body())


def test_observe_is_iterated_with_async_for_without_a_second_await(target: Target, script: Any) -> None:
    async def body() -> None:
        async with await connect_async(target, tools=[add]) as client:
            bot = await client.create_bot(name="Adder", model=adder_script(script))
            receipt = await client.send(await client.create_chat(bot), "2 + 3?")
            text = "".join([event.text or "" async for event in client.observe(receipt)])
            assert text == "2 + 3 = 5"
            stream = await client.observe(receipt)          # awaiting it still works
            assert [event.sequence async for event in stream][0] == 1

    run(body())


def test_a_handle_is_accepted_wherever_an_id_is(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Plain", model=script([{"text": "hi"}]), tools=[])
        chat = client.create_chat(bot)
        turn = client.send(chat, "hello")
        assert client.get_execution(turn).id == turn.id
        assert client.get_chat(chat).id == chat.id
        assert client.wait(turn).text == "hi"
        chat.delete()
        bot.delete()
