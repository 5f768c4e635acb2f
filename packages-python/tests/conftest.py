"""Fixtures: the two modes (memory:// and a real `openbot serve` on a fresh SQLite folder).

The server binary is `$OPENBOT_BIN`, else `$CARGO_TARGET_DIR/ci/openbot` (target dir default
`~/.cache/openbot/target`); `scripts/test-python` builds it first. A core built without its
remote client answers `connect("http://...")` with `unavailable` ("no remote client"); remote
tests then end as xfail with that reason instead of failing on a missing feature.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

import openbot_platform as openbot

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "tests" / "scenarios"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs an async test body on a fresh event loop."""
    return asyncio.run(coroutine)


def server_binary() -> Path:
    explicit = os.environ.get("OPENBOT_BIN")
    if explicit:
        return Path(explicit)
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/openbot/target")
    return Path(target) / "ci" / "openbot"


@dataclass
class Server:
    url: str
    token: str
    data_dir: str


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    binary = server_binary()
    if not binary.exists():
        pytest.fail(f"no server binary at {binary}: build it with scripts/test-python")
    data = tempfile.mkdtemp(prefix="openbot-py-")
    subprocess.run([str(binary), "migrate", "--data-dir", data], check=True, capture_output=True)
    stderr_path = Path(data) / "server.log"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [str(binary), "serve", "--data-dir", data, "--bind", "127.0.0.1:0",
             "--scripted-dir", tempfile.gettempdir()],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        assert process.stdout is not None
        token = process.stdout.readline().decode().strip()
        url = None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline:
            found = re.search(r"listening on (http://[0-9.:]+)", stderr_path.read_text())
            if found:
                url = found.group(1)
            elif process.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if url is None or not token:
            pytest.fail(f"the server did not start: {stderr_path.read_text()}")
        yield Server(url=url, token=token, data_dir=data)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(data, ignore_errors=True)


@dataclass
class Target:
    """Where a test connects: the URI and token of one mode."""

    mode: str
    uri: str
    token: str | None


def connect_sync(target: Target, **kwargs: Any) -> openbot.Client:
    """Connects the blocking client to the target."""
    return openbot.connect_sync(target.uri, token=target.token, **kwargs)


async def connect_async(target: Target, **kwargs: Any) -> openbot.AsyncClient:
    """Connects the async client to the target."""
    return await openbot.connect(target.uri, token=target.token, **kwargs)


@pytest.fixture(params=["memory", "remote"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "memory":
        return Target("memory", "memory://", None)
    server: Server = request.getfixturevalue("server")
    return Target("remote", server.url, server.token)


@pytest.fixture
def memory() -> Target:
    return Target("memory", "memory://", None)


@pytest.fixture
def script(tmp_path: Path) -> Any:
    """Writes a scripted model's steps to a file and returns the Bot model spec for it."""

    def write(steps: list[dict[str, Any]], repeat: bool = False) -> str:
        path = tmp_path / f"script-{len(list(tmp_path.iterdir()))}.json"
        import json

        path.write_text(json.dumps({"steps": steps, "repeat": repeat}))
        return f"scripted:{path}"

    return write
