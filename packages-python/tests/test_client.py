"""Behaviours of the Python Client, one per test, in both modes where the behaviour is the
Client's (the `target` fixture) and in memory mode where it is the binding's own."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import openbot_platform as openbot
from conftest import Target, connect_async, connect_sync, run

ADD = {
    "name": "add",
    "description": "Adds two integers.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}

ADD_THEN_ANSWER = [
    {"tool_calls": [{"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"text": "done"},
]


def tool_results(events: list[openbot.Event]) -> list[openbot.ToolResult]:
    return [r for r in (e.tool_result for e in events) if r is not None]


# --- tools -----------------------------------------------------------------------------------


def test_a_sync_python_tool_answers_the_model(target: Target, script: Any) -> None:
    seen: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        seen.append((a, b))
        return a + b

    with connect_sync(target, tools={"add": add}) as client:
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
        chat = client.create_chat(bot)
        events = list(client.observe(client.send(chat, "2+3?")))
    assert seen == [(2, 3)]
    assert [(r.name, r.text, r.is_error) for r in tool_results(events)] == [("add", "5", False)]
    assert events[-1].outcome == "completed"


def test_an_async_tool_runs_on_the_loop_that_connected(target: Target, script: Any) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def add(a: int, b: int) -> str:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.01)
        return str(a + b)

    async def body() -> None:
        async with await connect_async(target, tools={"add": add}) as client:
            bot = await client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
            chat = await client.create_chat(bot)
            events = [e async for e in await client.observe(await client.send(chat, "2+3?"))]
            assert [r.text for r in tool_results(events)] == ["5"]
            assert loops == [asyncio.get_running_loop()]

    run(body())


def test_the_blocking_client_runs_an_async_tool_on_a_loop_of_its_own(memory: Target, script: Any) -> None:
    async def add(a: int, b: int) -> str:
        await asyncio.sleep(0)
        return str(a + b)

    with connect_sync(memory, tools={"add": add}) as client:
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
        events = list(client.observe(client.send(client.create_chat(bot), "2+3?")))
    assert [r.text for r in tool_results(events)] == ["5"]


def test_an_exception_in_a_tool_gives_the_model_its_message(target: Target, script: Any) -> None:
    def add(a: int, b: int) -> int:
        raise ValueError(f"cannot add {a} and {b} today")

    with connect_sync(target, tools={"add": add}) as client:
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
        chat = client.create_chat(bot)
        events = list(client.observe(client.send(chat, "2+3?")))
    [result] = tool_results(events)
    assert result.is_error
    assert result.text == "cannot add 2 and 3 today"
    assert events[-1].outcome == "completed"


def test_an_exception_in_an_async_tool_gives_the_model_its_message(memory: Target, script: Any) -> None:
    async def add(a: int, b: int) -> int:
        raise KeyError("no such number")

    async def body() -> None:
        async with await connect_async(memory, tools={"add": add}) as client:
            bot = await client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
            chat = await client.create_chat(bot)
            events = [e async for e in await client.observe(await client.send(chat, "x"))]
            [result] = tool_results(events)
            assert result.is_error and "no such number" in result.text

    run(body())


def test_a_tool_result_is_json_unless_it_is_text(memory: Target, script: Any) -> None:
    with connect_sync(memory, tools={"add": lambda a, b: {"sum": a + b}}) as client:
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
        events = list(client.observe(client.send(client.create_chat(bot), "x")))
    assert [r.text for r in tool_results(events)] == ['{"sum": 5}']


def test_a_host_tool_waits_for_the_result_the_caller_delivers(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
        receipt = client.send(client.create_chat(bot), "2+3?")
        events = client.observe(receipt)
        call = None
        for event in events:
            if event.tool_call is not None:
                call = event.tool_call
                break
        assert call is not None and call.arguments == {"a": 2, "b": 3}
        client.deliver_tool_result(receipt, openbot.ToolResult.for_call(call, "5"))
        rest = list(events)
        assert [r.text for r in tool_results(rest)] == ["5"]
        assert rest[-1].outcome == "completed"


def test_a_tool_definition_is_read_from_the_signature() -> None:
    def add(a: int, b: float, note: str = "") -> str:
        """Adds two numbers."""
        return ""

    definition = openbot.tool_definition(add)
    assert definition.name == "add"
    assert definition.description == "Adds two numbers."
    assert definition.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "number"}, "note": {"type": "string"}},
        "required": ["a", "b"],
    }


def test_a_function_in_a_bots_tools_is_offered_with_its_definition(memory: Target, script: Any) -> None:
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    with connect_sync(memory, tools={"add": add}) as client:
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[add])
        assert bot.tools[0].name == "add" and bot.tools[0].input_schema["required"] == ["a", "b"]
        events = list(client.observe(client.send(client.create_chat(bot), "x")))
    assert [r.text for r in tool_results(events)] == ["5"]


# --- errors ----------------------------------------------------------------------------------


def test_an_unknown_id_raises_not_found_with_its_code(target: Target) -> None:
    with connect_sync(target) as client:
        with pytest.raises(openbot.NotFoundError) as raised:
            client.get_bot("019ad1c8-0000-7000-8000-000000000000")
    assert raised.value.code == "not_found"
    assert isinstance(raised.value, openbot.OpenBotError)
    assert raised.value.category is None and raised.value.error_id is None


def test_a_malformed_id_raises_invalid_input(target: Target) -> None:
    with connect_sync(target) as client:
        with pytest.raises(openbot.InvalidInputError, match="not-an-id"):
            client.get_bot("not-an-id")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: c.get_bot(42), "expected a Bot or a Bot ID"),
        (lambda c: c.create_bot(name=1, model="scripted:x"), "name must be a str"),
        (lambda c: c.send("019ad1c8-0000-7000-8000-000000000000", 3), "input must be a str"),
        (lambda c: c.observe("019ad1c8-0000-7000-8000-000000000000", after="0"), "after must be an int"),
        (lambda c: c.create_bot(name="x", model="scripted:x", tools="add"), "tools must be a list"),
        (lambda c: c.update_bot("019ad1c8-0000-7000-8000-000000000000", shared="yes"), "shared must be a bool"),
    ],
)
def test_a_wrong_argument_type_raises_type_error(memory: Target, call: Any, message: str) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(TypeError, match=message):
            call(client)


def test_connect_with_a_wrong_tools_argument_raises_type_error() -> None:
    with pytest.raises(TypeError, match="tools must be a dict or a list of functions"):
        openbot.connect_sync("memory://", tools="add")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a tool must be a named function"):
        openbot.connect_sync("memory://", tools=[3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a function"):
        openbot.connect_sync("memory://", tools={"x": 3})


def test_an_unknown_scheme_raises_invalid_input() -> None:
    with pytest.raises(openbot.InvalidInputError, match="unknown scheme"):
        openbot.connect_sync("ftp://example")


def test_a_reused_command_key_with_other_input_raises_conflict(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Echo", model=script([{"text": "ok"}], repeat=True))
        chat = client.create_chat(bot)
        first = client.send(chat, "hi", command_key="k-1")
        assert client.send(chat, "hi", command_key="k-1") == first
        with pytest.raises(openbot.ConflictError):
            client.send(chat, "other", command_key="k-1")


def test_an_update_with_an_old_revision_raises_conflict(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Old", model=script([]))
        renamed = client.update_bot(bot, name="New", revision=bot.revision)
        assert renamed.name == "New" and renamed.revision == bot.revision + 1
        with pytest.raises(openbot.ConflictError):
            client.update_bot(bot, name="Newer", revision=bot.revision)


def test_a_closed_client_raises_closed(target: Target) -> None:
    client = connect_sync(target)
    client.close()
    with pytest.raises(openbot.ClosedError) as raised:
        client.list_bots()
    assert raised.value.code == "closed"


def test_a_closed_async_client_raises_closed(target: Target) -> None:
    async def body() -> None:
        client = await connect_async(target)
        await client.close()
        with pytest.raises(openbot.ClosedError):
            await client.list_bots()

    run(body())


def test_a_server_that_is_down_raises_unavailable(memory: Target) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = Target("remote", f"http://127.0.0.1:{port}", "no-token")
    with pytest.raises(openbot.UnavailableError):
        client = connect_sync(target)
        client.list_bots()


def test_a_client_of_several_nodes_goes_on_at_the_next_when_one_is_down(server: Any, script: Any) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nodes = Target("remote", f"http://127.0.0.1:{port},{server.url}", server.token)
    with connect_sync(nodes) as client:
        bot = client.create_bot(name="Failover", model=script([{"text": "from the next node"}]))
        chat = client.create_chat(bot)
        receipt = client.send(chat, "hi", command_key="several-py")
        assert client.send(chat, "hi", command_key="several-py") == receipt
        assert client.get_bot(bot).name == "Failover"


def test_a_server_list_with_an_empty_entry_raises_invalid_input() -> None:
    with pytest.raises(openbot.InvalidInputError, match="not a server URL"):
        openbot.connect_sync("http://127.0.0.1:9,", token="t")


# --- waiting and cancelling ------------------------------------------------------------------


SLOW = [{"deltas": ["a", "b", "c", "d", "e"], "delay_ms": 100}]


def test_a_cancelled_await_raises_cancelled_error_and_the_client_goes_on(target: Target, script: Any) -> None:
    async def body() -> None:
        async with await connect_async(target) as client:
            bot = await client.create_bot(name="Slow", model=script(SLOW, repeat=True))
            chat = await client.create_chat(bot)
            receipt = await client.send(chat, "go")
            stream = await client.observe(receipt)

            async def read_all() -> list[openbot.Event]:
                return [e async for e in stream]

            task = asyncio.ensure_future(read_all())
            await asyncio.sleep(0.15)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Closing an observer cancels nothing: the Turn still completes.
            ended = await client.wait(receipt)
            assert ended.state == "completed" and ended.outcome == "completed"

    run(body())


def test_cancel_execution_ends_the_turn_as_cancelled(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Slow", model=script(SLOW, repeat=True))
        receipt = client.send(client.create_chat(bot), "go")
        client.cancel_execution(receipt)
        ended = client.wait(receipt)
        assert ended.state == "cancelled"
        assert list(client.observe(receipt))[-1].outcome == "cancelled"


def test_a_blocking_wait_releases_the_gil(memory: Target, script: Any) -> None:
    counter = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal counter
        while not stop.is_set():
            counter += 1

    with connect_sync(memory) as client:
        bot = client.create_bot(name="Slow", model=script(SLOW))
        receipt = client.send(client.create_chat(bot), "go")
        thread = threading.Thread(target=spin)
        thread.start()
        before = counter
        started = time.monotonic()
        client.wait(receipt)
        waited = time.monotonic() - started
        progressed = counter - before
        stop.set()
        thread.join()
    # The Turn takes about 0.5 s; a waiting thread that held the GIL would stop the spinner.
    assert waited > 0.3
    assert progressed > 100_000


def test_ctrl_c_interrupts_a_blocking_wait(script: Any) -> None:
    # In a process of its own, with Python's own SIGINT handler: a process started in the
    # background by a shell inherits SIGINT ignored, and pytest owns the handler in its own.
    program = f"""
import os, signal, threading, time
import openbot_platform as openbot
signal.signal(signal.SIGINT, signal.default_int_handler)
with openbot.connect_sync("memory://") as client:
    bot = client.create_bot(name="Slow", model={script([{"text": "x", "delay_ms": 30000}])!r})
    receipt = client.send(client.create_chat(bot), "go")
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    try:
        client.wait(receipt)
        print("not interrupted")
    except KeyboardInterrupt:
        print(f"interrupted after {{time.monotonic() - started:.1f}} s")
    # The client still works after the interrupted wait.
    assert client.get_execution(receipt).id == receipt.execution_id
    print("client works")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0].startswith("interrupted after "), done.stdout
    assert float(lines[0].split()[2]) < 2
    assert lines[1] == "client works"


def test_the_blocking_client_works_inside_a_running_event_loop(memory: Target, script: Any) -> None:
    def add(a: int, b: int) -> int:
        return a + b

    async def body() -> list[str]:
        # A blocking call in a coroutine blocks this loop while it waits, and nothing more.
        with connect_sync(memory, tools={"add": add}) as client:
            bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
            events = list(client.observe(client.send(client.create_chat(bot), "x")))
            return [r.text for r in tool_results(events)]

    assert run(body()) == ["5"]


def test_events_resume_after_a_cursor(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Greeter", model=script([{"text": "hello"}]))
        receipt = client.send(client.create_chat(bot), "hi")
        everything = list(client.observe(receipt))
        later = list(client.observe(receipt, after=2))
    assert [e.sequence for e in later] == [e.sequence for e in everything[2:]]
    assert later[0].sequence == 3


def test_history_holds_the_turns_messages_in_order(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Greeter", model=script([{"text": "hello"}]))
        chat = client.create_chat(bot)
        client.wait(client.send(chat, "hi"))
        history = list(client.history(chat))
    assert [(e.role, e.text) for e in history] == [("user", "hi"), ("assistant", "hello")]


# --- fork --------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_after_fork_the_parents_client_fails_fast_and_a_new_one_works(memory: Target, script: Any) -> None:
    model = script([{"text": "from the child"}])
    with connect_sync(memory) as client:
        client.list_bots()  # the runtime is running in the parent
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                os.close(read)
                try:
                    client.list_bots()
                    report = "parent client worked"
                except openbot.ClosedError as error:
                    report = "closed:" + error.message
                with openbot.connect_sync("memory://") as fresh:
                    bot = fresh.create_bot(name="Child", model=model)
                    chat = fresh.create_chat(bot)
                    fresh.wait(fresh.send(chat, "hi"))
                    report += "|" + list(fresh.history(chat))[-1].text
                os.write(write, report.encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        report = os.read(read, 4096).decode()
        os.close(read)
        assert os.WEXITSTATUS(status) == 0, report
        closed, answer = report.split("|")
        assert closed.startswith("closed:") and "forked" in closed
        assert answer == "from the child"
        # The parent's client is untouched.
        client.list_bots()


def test_the_native_noop_call_returns_none() -> None:
    assert openbot._native.noop() is None
    assert sys.modules["openbot_platform._native"] is openbot._native


# --- Chats and their input -----------------------------------------------------------------------


def test_input_sent_while_a_turn_runs_waits_for_a_turn_of_its_own(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Slow", model=script(SLOW, repeat=True))
        chat = client.create_chat(bot)
        first = client.send(chat, "one")
        second = client.send(chat, "two")
        assert first.disposition == "started"
        assert second.disposition == "queued" and second.execution_id != first.execution_id
        assert client.wait(first).outcome == "completed"
        assert client.wait(second).outcome == "completed"
        users = [e.text for e in client.history(chat) if e.role == "user"]
    assert users == ["one", "two"]


def test_steered_input_joins_the_running_turn(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Slow", model=script(SLOW, repeat=True))
        chat = client.create_chat(bot)
        first = client.send(chat, "one")
        steered = client.steer(chat, "and also this")
        assert steered.disposition == "steered"
        assert steered.execution_id == first.execution_id
        events = list(client.observe(first))
    assert "input_steered" in [e.type for e in events]


def test_stop_cancels_the_running_turn(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Slow", model=script(SLOW, repeat=True))
        chat = client.create_chat(bot)
        receipt = client.send(chat, "go")
        client.stop(chat)
        assert client.wait(receipt).outcome == "cancelled"


def test_a_deleted_chat_is_not_found(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Gone", model=script(SLOW, repeat=True))
        chat = client.create_chat(bot)
        receipt = client.send(chat, "go")
        client.delete_chat(chat)
        assert client.get_execution(receipt).is_terminal
        with pytest.raises(openbot.NotFoundError):
            client.get_chat(chat)


def test_deleting_a_bot_closes_its_chats(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Owner", model=script([]))
        chat = client.create_chat(bot)
        client.delete_bot(bot)
        with pytest.raises(openbot.NotFoundError):
            client.get_bot(bot)
        with pytest.raises(openbot.NotFoundError):
            client.create_chat(bot)
        # Its Chats close as a Chat's deletion closes them (on a server, in the background).
        for _ in range(200):
            try:
                client.get_chat(chat)
            except openbot.NotFoundError:
                break
            time.sleep(0.05)
        with pytest.raises(openbot.NotFoundError):
            client.get_chat(chat)


def test_list_bots_returns_them_oldest_first(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        made = [client.create_bot(name=f"Bot {i}", model=script([])).id for i in range(3)]
        listed = [b.id for b in client.list_bots() if b.id in made]
    assert listed == made


def test_the_blocking_client_serves_many_threads_at_once(memory: Target, script: Any) -> None:
    with connect_sync(memory) as client:
        bot = client.create_bot(name="Greeter", model=script([{"text": "hi"}], repeat=True))
        outcomes: list[str | None] = []

        def one_turn() -> None:
            outcomes.append(client.wait(client.send(client.create_chat(bot), "hi")).outcome)

        threads = [threading.Thread(target=one_turn) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert outcomes == ["completed"] * 8


def test_breaking_out_of_an_async_stream_cancels_nothing(target: Target, script: Any) -> None:
    async def body() -> None:
        async with await connect_async(target) as client:
            bot = await client.create_bot(name="Slow", model=script(SLOW, repeat=True))
            receipt = await client.send(await client.create_chat(bot), "go")
            async with await client.observe(receipt) as stream:
                async for event in stream:
                    if event.type == "text_delta":
                        break
            assert (await client.wait(receipt)).outcome == "completed"

    run(body())


def test_an_async_tool_whose_loop_has_closed_gives_an_error_result(memory: Target, script: Any) -> None:
    async def add(a: int, b: int) -> int:
        return a + b

    async def connect_and_make_bot() -> tuple[openbot.AsyncClient, openbot.Bot]:
        client = await connect_async(memory, tools={"add": add})
        return client, await client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])

    client, bot = run(connect_and_make_bot())  # that loop is closed when run() returns

    async def use_from_another_loop() -> list[openbot.ToolResult]:
        receipt = await client.send(await client.create_chat(bot), "x")
        events = [e async for e in await client.observe(receipt)]
        await client.close()
        return tool_results(events)

    [result] = run(use_from_another_loop())
    assert result.is_error and "closed" in result.text


def test_a_turn_whose_model_fails_ends_with_a_failed_event_naming_its_record(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Broken", model=script([{"error": "unauthorized"}]))
        receipt = client.send(client.create_chat(bot), "hi")
        events = list(client.observe(receipt))
        execution = client.get_execution(receipt)
    last = events[-1]
    assert last.type == "failed" and last.is_terminal
    assert last.category == "model_provider"
    assert last.error_id is not None and len(last.error_id) == 36
    assert execution.state == "failed"


def test_turn_ended_carries_the_turns_usage(memory: Target, script: Any) -> None:
    usage = {"input_tokens": 7, "output_tokens": 3}
    with connect_sync(memory) as client:
        bot = client.create_bot(name="Counter", model=script([{"text": "hi", "usage": usage}]))
        events = list(client.observe(client.send(client.create_chat(bot), "hi")))
    ended = events[-1]
    assert ended.usage is not None
    assert (ended.usage.input_tokens, ended.usage.output_tokens) == (7, 3)
    assert [e.attempt for e in events if e.type == "model_step_started"] == [1]


def in_child(work: Any, timeout: float = 20) -> str:
    """Runs `work()` in a forked child; returns what it returned (a str), failing on a hang."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            os.write(write, str(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    report = os.read(read, 4096).decode()
    os.close(read)
    assert os.WEXITSTATUS(status) == 0, report
    return report


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_after_fork_the_parents_async_client_fails_fast_and_a_new_one_works(memory: Target, script: Any) -> None:
    model = script([{"text": "async child"}])

    async def connect_in_parent() -> openbot.AsyncClient:
        client = await connect_async(memory)
        await client.list_bots()
        return client

    parent = run(connect_in_parent())

    def child() -> str:
        async def body() -> str:
            try:
                await parent.list_bots()
                return "the parent's client worked"
            except openbot.ClosedError:
                pass
            async with await openbot.connect("memory://") as fresh:
                bot = await fresh.create_bot(name="Child", model=model)
                chat = await fresh.create_chat(bot)
                await fresh.wait(await fresh.send(chat, "hi"))
                return (await fresh.history(chat))[-1].text

        return run(body())

    assert in_child(child) == "async child"

    async def still_works() -> None:
        await parent.list_bots()
        await parent.close()

    run(still_works())


def test_many_concurrent_async_calls_each_get_their_own_answer(target: Target, script: Any) -> None:
    async def body() -> None:
        async with await connect_async(target) as client:
            bots = await asyncio.gather(
                *(client.create_bot(name=f"Bot {i}", model=script([])) for i in range(20))
            )
            read = await asyncio.gather(*(client.get_bot(bot) for bot in bots for _ in range(5)))
            assert [b.id for b in read] == [bot.id for bot in bots for _ in range(5)]
            assert [b.name for b in bots] == [f"Bot {i}" for i in range(20)]

    run(body())


def test_an_async_client_serves_two_event_loops_one_after_the_other(memory: Target, script: Any) -> None:
    async def make() -> tuple[openbot.AsyncClient, openbot.Bot]:
        client = await connect_async(memory)
        return client, await client.create_bot(name="Greeter", model=script([{"text": "hi"}]))

    client, bot = run(make())

    async def use() -> str | None:
        execution = await client.wait(await client.send(await client.create_chat(bot), "hi"))
        await client.close()
        return execution.outcome

    assert run(use()) == "completed"


def test_a_tool_may_call_the_client_it_runs_in(target: Target, script: Any) -> None:
    holder: dict[str, openbot.Client] = {}

    def add(a: int, b: int) -> str:
        bots = list(holder["client"].list_bots())  # a blocking call from the tool's worker thread
        return f"{a + b} ({len(bots) > 0})"

    with connect_sync(target, tools={"add": add}) as client:
        holder["client"] = client
        bot = client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
        events = list(client.observe(client.send(client.create_chat(bot), "x")))
    assert [r.text for r in tool_results(events)] == ["5 (True)"]


def test_an_async_tool_may_await_the_client_it_runs_in(memory: Target, script: Any) -> None:
    holder: dict[str, openbot.AsyncClient] = {}

    async def add(a: int, b: int) -> str:
        bots = await holder["client"].list_bots()
        return f"{a + b} ({len(bots)})"

    async def body() -> list[str]:
        async with await connect_async(memory, tools={"add": add}) as client:
            holder["client"] = client
            bot = await client.create_bot(name="Adder", model=script(ADD_THEN_ANSWER), tools=[ADD])
            events = [e async for e in await client.observe(await client.send(await client.create_chat(bot), "x"))]
            return [r.text for r in tool_results(events)]

    assert run(body()) == ["5 (1)"]


def test_input_may_be_a_list_of_content_parts(target: Target, script: Any) -> None:
    with connect_sync(target) as client:
        bot = client.create_bot(name="Greeter", model=script([{"text": "hello"}]))
        chat = client.create_chat(bot)
        client.wait(client.send(chat, [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]))
        assert list(client.history(chat))[0].text == "hi there"


def test_a_wrong_token_raises_unauthorized(server: Any) -> None:
    with openbot.connect_sync(server.url, token="not-a-token") as client:
        with pytest.raises(openbot.UnauthorizedError) as raised:
            client.list_bots()
    assert raised.value.code == "unauthorized"
