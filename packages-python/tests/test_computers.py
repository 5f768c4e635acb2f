"""This machine as a Computer in memory mode: a Bot works in a real terminal and on text files
inside the allowed folders (docs/computers.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import openbot_platform as openbot
from conftest import run, server_binary


def tool_results(events: list[openbot.Event]) -> list[openbot.ToolResult]:
    return [r for r in (e.tool_result for e in events) if r is not None]


def test_a_bot_in_memory_writes_a_file_and_reads_it_back_through_a_terminal(
    tmp_path: Path, script: Any
) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    steps = [
        {"tool_calls": [{"id": "w", "name": "computer_file_write",
                         "arguments": {"path": "note.txt", "content": "from python\n"}}]},
        {"tool_calls": [{"id": "s", "name": "computer_terminal_start",
                         "arguments": {"command": "cat note.txt"}}]},
        {"tool_calls": [{"id": "r", "name": "computer_terminal_read",
                         "arguments": {"session_id": "t1", "wait_ms": 5000}}]},
        {"text": "done"},
    ]
    with openbot.connect_sync("memory://", computer={"folders": [folder]}) as client:
        bot = client.create_bot(
            name="Operator", model=script(steps), tools=list(openbot.COMPUTER_TOOLS)
        )
        chat = client.create_chat(bot)
        events = list(client.observe(client.send(chat, "go")))
    results = tool_results(events)
    assert [r.is_error for r in results] == [False, False, False]
    assert (folder / "note.txt").read_text() == "from python\n"
    output = json.loads(results[2].text)
    assert "from python" in "".join(c["text"] for c in output["chunks"])


def test_a_path_outside_the_folders_is_an_error_result_for_the_model(
    tmp_path: Path, script: Any
) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("keep out")
    steps = [
        {"tool_calls": [{"id": "o", "name": "computer_file_read",
                         "arguments": {"path": str(secret)}}]},
        {"text": "done"},
    ]
    computer = {"folders": [str(folder)], "terminal": False}
    with openbot.connect_sync("memory://", computer=computer) as client:
        bot = client.create_bot(
            name="Reader", model=script(steps), tools=["computer_file_read"]
        )
        events = list(client.observe(client.send(client.create_chat(bot), "go")))
    [result] = tool_results(events)
    assert result.is_error
    assert "outside the folders" in result.text


def test_the_async_client_attaches_a_computer_too(tmp_path: Path, script: Any) -> None:
    steps = [
        {"tool_calls": [{"id": "w", "name": "computer_file_write",
                         "arguments": {"path": "a.txt", "content": "async"}}]},
        {"text": "done"},
    ]

    async def main() -> None:
        computer = {"folders": [tmp_path]}
        async with await openbot.connect("memory://", computer=computer) as client:
            bot = await client.create_bot(
                name="Writer", model=script(steps), tools=["computer_file_write"]
            )
            receipt = await client.send(await client.create_chat(bot), "go")
            events = [e async for e in await client.observe(receipt)]
        assert events[-1].outcome == "completed"

    run(main())
    assert (tmp_path / "a.txt").read_text() == "async"


def test_a_missing_folder_is_invalid_input_and_a_server_refuses_a_computer(
    tmp_path: Path,
) -> None:
    with pytest.raises(openbot.InvalidInputError):
        openbot.connect_sync("memory://", computer={"folders": [tmp_path / "nope"]})
    with pytest.raises(openbot.InvalidInputError):
        openbot.connect_sync("memory://", computer={"folders": []})
    with pytest.raises(openbot.InvalidInputError):
        openbot.connect_sync("http://127.0.0.1:9", computer={"folders": [tmp_path]})
    with pytest.raises(TypeError):
        openbot.connect_sync("memory://", computer={"folders": str(tmp_path)})


def test_a_paired_machine_granted_to_a_bot_runs_its_command_and_a_member_reads_it(
    tmp_path: Path, script: Any, server: Any
) -> None:
    folder = tmp_path / "machine"
    folder.mkdir()

    async def body() -> None:
        client = await openbot.connect(server.url, token=server.token)
        pairing = await client.start_pairing(name="python-box")
        computer = await client.approve_pairing(code=pairing.code)
        claim = await client.claim_pairing(pairing.id, secret=pairing.secret)
        saved = folder / "computer.json"
        saved.write_text(json.dumps(
            {"server": server.url, "computer_id": str(computer.id), "credential": claim.credential}
        ))
        agent = await asyncio.create_subprocess_exec(
            str(server_binary()), "computer", "run", "--json", "--credential-file", str(saved),
            "--folder", str(folder), stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert agent.stdout is not None
            while json.loads(await agent.stdout.readline())["event"] != "linked":
                pass
            steps = [
                {"tool_calls": [{"id": "s", "name": "computer_terminal_start",
                                 "arguments": {"command": "echo from-the-machine"}}]},
                {"text": "started"},
            ]
            # On a server the Bot names the Computer tools; the grant routes them to the machine.
            tools = [openbot.ToolDefinition(name=name, description="A Computer tool.",
                                            input_schema={"type": "object"})
                     for name in openbot.COMPUTER_TOOLS]
            bot = await client.create_bot(name="Operator", model=script(steps), tools=tools)
            grant = await client.grant_computer(computer.id, bot.id, ask=False)
            assert grant.ask is False
            chat = await client.create_chat(bot)
            events = [e async for e in await client.observe(await client.send(chat, "go"))]
            result = tool_results(events)[0]
            assert result.is_error is False, result
            session = json.loads(result.text)["id"]
            cursor, text = 0, ""
            for _ in range(20):
                out = await client.terminal_output(computer.id, session, after=cursor, wait_ms=2000)
                cursor = out.next_cursor
                text += "".join(c.text for c in out.chunks)
                if out.exited:
                    break
            assert "from-the-machine" in text
            await client.revoke_computer(computer.id, bot.id)
            with pytest.raises(openbot.NotFoundError):
                await client.revoke_computer(computer.id, bot.id)
        finally:
            agent.kill()
            await agent.wait()
            await client.close()

    run(body())


def _mcp_fixture(log: Path) -> str:
    """The agent's `--connector` value for the repository's fixture MCP server on stdio, on the
    venv `scripts/mcp-install` made."""
    import os

    mcp = Path(os.environ.get("OPENBOT_MCP_DIR", Path.home() / ".cache/openbot/mcp"))
    python = mcp / "venv/bin/python"
    if not python.exists():
        pytest.fail(f"the MCP test servers are not installed in {mcp}: run scripts/mcp-install")
    fixture = Path(__file__).resolve().parents[2] / "server/tests/support/mcp_fixture.py"
    return f"notes={python} {fixture} --log {log} --delay 0"


def test_a_connector_a_paired_machine_publishes_is_an_app_a_bot_calls(
    tmp_path: Path, script: Any, server: Any
) -> None:
    folder = tmp_path / "machine"
    folder.mkdir()
    log = tmp_path / "fixture.log"

    async def body() -> None:
        client = await openbot.connect(server.url, token=server.token)
        pairing = await client.start_pairing(name="python-connector")
        computer = await client.approve_pairing(code=pairing.code, shared=True)
        claim = await client.claim_pairing(pairing.id, secret=pairing.secret)
        saved = folder / "computer.json"
        saved.write_text(json.dumps(
            {"server": server.url, "computer_id": str(computer.id), "credential": claim.credential}
        ))
        agent = await asyncio.create_subprocess_exec(
            str(server_binary()), "computer", "run", "--json", "--credential-file", str(saved),
            "--folder", str(folder), "--connector", _mcp_fixture(log),
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert agent.stdout is not None
            while json.loads(await agent.stdout.readline())["event"] != "linked":
                pass
            app = await client.register_app(name="notes", transport={
                "type": "connector", "computer_id": str(computer.id), "connector": "notes"})
            connection = await client.open_app_connection(app.id, auth="none")
            found = await client.discover_app_tools(app.id, connection.id)
            assert {t.name for t in found.tools} >= {"write_note", "read_note"}
            steps = [
                {"tool_calls": [{"id": "n", "name": "notes__write_note",
                                 "arguments": {"text": "milk"}}]},
                {"text": "noted"},
            ]
            tools = [openbot.ToolDefinition(name="notes__write_note", description="-",
                                            input_schema={"type": "object"})]
            bot = await client.create_bot(name="Noter", model=script(steps), tools=tools)
            chat = await client.create_chat(bot)
            events = [e async for e in await client.observe(await client.send(chat, "go"))]
            result = tool_results(events)[0]
            assert result.is_error is False, result
            assert result.text == "write_note: milk"
            # The local server ran the call once.
            calls = [line for line in log.read_text().splitlines()
                     if line.startswith("call write_note")]
            assert len(calls) == 1, calls
        finally:
            agent.kill()
            await agent.wait()
            await client.close()

    run(body())
