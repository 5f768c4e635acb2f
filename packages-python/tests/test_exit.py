"""The interpreter exits cleanly while Turns are still calling Python tools: at exit, tool calls
stop entering Python (a runtime thread entering a finalizing interpreter would crash it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
import asyncio, json, tempfile, time
import openbot_platform as openbot

script = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
json.dump({"steps": [{"tool_calls": [{"name": "slow", "arguments": {}},
                                     {"name": "aslow", "arguments": {}}]}], "repeat": True}, script)
script.close()
TOOLS = [{"name": "slow", "input_schema": {"type": "object"}},
         {"name": "aslow", "input_schema": {"type": "object"}}]

def slow():
    time.sleep(0.02)
    return "ok"

async def aslow():
    await asyncio.sleep(0.02)
    return "ok"

def blocking():
    client = openbot.connect_sync("memory://", tools={"slow": slow, "aslow": aslow})
    bot = client.create_bot(name="b", model="scripted:" + script.name, tools=TOOLS,
                            limits={"max_steps": 100000})
    for _ in range(4):
        client.send(client.create_chat(bot), "go")
    time.sleep(0.3)

async def asynchronous():
    client = await openbot.connect("memory://", tools={"slow": slow, "aslow": aslow})
    bot = await client.create_bot(name="b", model="scripted:" + script.name, tools=TOOLS,
                                  limits={"max_steps": 100000})
    for _ in range(4):
        await client.send(await client.create_chat(bot), "go")
    await asyncio.sleep(0.3)

if MODE == "blocking":
    blocking()
else:
    asyncio.run(asynchronous())
print("exiting with Turns running", flush=True)
"""


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_the_interpreter_exits_cleanly_while_turns_call_python_tools(mode: str) -> None:
    program = f"MODE = {mode!r}\n" + textwrap.dedent(PROGRAM)
    for _ in range(3):  # the crash it guards against did not happen on every exit
        done = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "exiting with Turns running" in done.stdout
