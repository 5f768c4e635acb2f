"""Unknown outcomes: ``list_unknown_outcomes`` and ``decide_outcome`` in memory (nothing waits;
deciding is refused), and against a real ``openbot serve`` a write whose answer was lost when the
server was killed: listed after the restart, decided through the SDK, and not sent again."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import openbot
from conftest import Target, connect_async, connect_sync, run, server_binary

SOME_ID = "019ad1c8-0000-7000-8000-000000000000"

# --- in memory -------------------------------------------------------------------------------


def test_in_memory_nothing_waits_for_a_decision(memory: Target) -> None:
    with connect_sync(memory) as client:
        page = client.list_unknown_outcomes()
        assert page.items == [] and page.next_cursor is None
        assert client.list_unknown_outcomes(limit=10).items == []


def test_in_memory_deciding_raises_invalid_input(memory: Target) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(openbot.InvalidInputError, match="only a server has unknown outcomes"):
            client.decide_outcome(SOME_ID, "1/tool:0/1", "give_up")
        with pytest.raises(openbot.InvalidInputError, match="outcome decision"):
            client.decide_outcome(SOME_ID, "1/tool:0/1", "perhaps")  # type: ignore[arg-type]


def test_the_async_client_lists_and_decides_outcomes_like_the_blocking_one(memory: Target) -> None:
    async def body() -> None:
        async with await connect_async(memory) as client:
            assert (await client.list_unknown_outcomes(limit=5)).items == []
            with pytest.raises(openbot.InvalidInputError):
                await client.decide_outcome(SOME_ID, "1/tool:0/1", "applied", result="paid")

    run(body())


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda c: c.list_unknown_outcomes(limit="5"), TypeError, "limit must be an int"),
        (lambda c: c.list_unknown_outcomes(limit=0), ValueError, "limit must be at least 1"),
        (lambda c: c.list_unknown_outcomes(cursor=5), TypeError, "cursor must be a str"),
        (lambda c: c.decide_outcome(7, "1/tool:0/1", "give_up"), TypeError, "expected an Execution"),
        (lambda c: c.decide_outcome(SOME_ID, 1, "give_up"), TypeError, "call must be a str"),
        (lambda c: c.decide_outcome(SOME_ID, "1/tool:0/1", None), TypeError, "decision must be a str"),
        (lambda c: c.decide_outcome(SOME_ID, "1/tool:0/1", "applied", result=5), TypeError, "result must be a str"),
    ],
)
def test_a_wrong_argument_of_the_outcome_calls_raises_before_anything_is_sent(
    memory: Target, call: Any, error: type[Exception], message: str
) -> None:
    with connect_sync(memory) as client:
        with pytest.raises(error, match=message):
            call(client)


# --- against a server that is killed and restarted -------------------------------------------


@dataclass
class Endpoint:
    """A local HTTP endpoint standing for a payment service: it records every call and never
    answers the first one, as an answer lost on the way back."""

    url: str
    keys: list[str] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    keys: list[str] = []
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            keys.append(self.headers.get("Idempotency-Key") or "")
            if len(keys) == 1:
                release.wait(60)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"paid")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield Endpoint(url=f"http://127.0.0.1:{http.server_address[1]}/pay", keys=keys)
    finally:
        release.set()
        http.shutdown()
        http.server_close()


class Node:
    """An ``openbot serve`` on a data folder of its own that a test kills and starts again."""

    def __init__(self) -> None:
        self.data = tempfile.mkdtemp(prefix="openbot-py-outcomes-")
        subprocess.run([str(server_binary()), "migrate", "--data-dir", self.data], check=True, capture_output=True)
        self.token = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.url = self.start()

    def start(self) -> str:
        log = Path(self.data) / f"server-{time.monotonic_ns()}.log"
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(
                [str(server_binary()), "serve", "--data-dir", self.data, "--bind", "127.0.0.1:0", "--lease-ms", "1000",
                 "--scripted-dir", tempfile.gettempdir()],
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        if not self.token:
            # Only the first start prints the admin token.
            assert self.process.stdout is not None
            self.token = self.process.stdout.readline().decode().strip()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"listening on (http://[0-9.:]+)", log.read_text())
            if found:
                return found.group(1)
            time.sleep(0.05)
        pytest.fail(f"the server did not start: {log.read_text()}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.url = self.start()


@pytest.fixture
def node() -> Iterator[Node]:
    started = Node()
    try:
        yield started
    finally:
        started.kill()


def register_pay(node: Node, endpoint: Endpoint) -> None:
    request = urllib.request.Request(
        f"{node.url}/v1/tools/pay",
        method="PUT",
        data=json.dumps({"description": "Pays.", "input_schema": {"type": "object"}, "url": endpoint.url}).encode(),
        headers={"Authorization": f"Bearer {node.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


def test_a_lost_write_is_listed_after_a_restart_and_an_applied_decision_never_sends_it_again(
    node: Node, endpoint: Endpoint, script: Any
) -> None:
    register_pay(node, endpoint)
    model = script([{"tool_calls": [{"name": "pay", "arguments": {"amount": 5}}]}, {"text": "Paid."}])
    with openbot.connect_sync(node.url, token=node.token) as client:
        bot = client.create_bot(name="Payer", model=model, tools=[{"name": "pay", "input_schema": {"type": "object"}}])
        receipt = client.send(client.create_chat(bot), "Pay 5")
        deadline = time.monotonic() + 30
        while not endpoint.keys and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(endpoint.keys) == 1, "the write was sent"
    node.restart()

    async def body() -> None:
        async with await openbot.connect(node.url, token=node.token) as client:
            page = await client.list_unknown_outcomes(limit=10)
            for _ in range(300):
                if page.items:
                    break
                await asyncio.sleep(0.1)
                page = await client.list_unknown_outcomes(limit=10)
            assert page.next_cursor is None
            [waiting] = page.items
            assert waiting.execution_id == receipt.execution_id and waiting.call == "1/tool:0/1"
            assert (waiting.tool_call.name, waiting.tool_call.arguments) == ("pay", {"amount": 5})
            assert waiting.idempotency_key == endpoint.keys[0]

            record = await client.decide_outcome(receipt, waiting.call, "applied", result="paid by hand")
            assert (record.decision, record.call) == ("applied", "1/tool:0/1")
            assert record.token_id is not None
            ended = await client.wait(receipt)
            assert ended.state == "completed"
            with pytest.raises(openbot.ConflictError):
                await client.decide_outcome(receipt, waiting.call, "not_applied")

    run(body())
    assert len(endpoint.keys) == 1, "the write was not sent again"
