"""Steps per second of DBOS Transact (pip `dbos`), the DBOS side of
`tests/bench/src/engine_steps.rs`, run by it as a child process in the same run.

The same workload as the engine's Turns: `--workflows` workflows run at once, each doing
`--steps` iterations of one model step and one tool step:

- `model_step` is a `@DBOS.step` that returns the scripted answer (one call to `echo`), like
  the engine's scripted model: no network;
- `tool_step` is a `@DBOS.step` that POSTs the call's arguments to the same HTTP endpoint the
  engine's tool uses (`--tool-url`, served by the Rust benchmark), with an `Idempotency-Key`
  header, over a kept-alive connection per thread, and returns the tool result.

So one iteration records two step outputs in DBOS's system database, as the engine records a
model result and a tool result per step. Workflows are started with `DBOS.start_workflow`
(DBOS runs each in a thread of its executor) and a round waits for all their results. The
figure is (workflows x steps) / round time, the median of `--rounds` rounds after `--warmup`
rounds. `dbos_steps_per_s` counts each `@DBOS.step` call instead (twice as many).

Prints one JSON line (with `--handshake`, after a line `READY` printed before the measured
rounds; after each it waits for a line on stdin):
{"framework": "dbos", "version": ..., "steps_per_s": ..., "dbos_steps_per_s": ..., ...}
"""

from __future__ import annotations

import argparse
import http.client
import importlib.metadata
import json
import platform
import statistics
import sys
import threading
import time
import urllib.parse
from typing import Any

from dbos import DBOS, DBOSConfig

_local = threading.local()
_tool: tuple[str, int, str] = ("127.0.0.1", 0, "/echo")


def post_tool(arguments: dict[str, Any], idempotency_key: str) -> str:
    """POSTs the arguments to the tool endpoint and returns the answer's text."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = http.client.HTTPConnection(_tool[0], _tool[1], timeout=30)
        _local.conn = conn
    body = json.dumps(arguments)
    headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
    try:
        conn.request("POST", _tool[2], body=body, headers=headers)
        response = conn.getresponse()
    except (http.client.HTTPException, OSError):
        # The kept-alive connection was closed by the server: open a new one once.
        conn.close()
        conn = http.client.HTTPConnection(_tool[0], _tool[1], timeout=30)
        _local.conn = conn
        conn.request("POST", _tool[2], body=body, headers=headers)
        response = conn.getresponse()
    text = response.read().decode()
    if response.status != 200:
        raise RuntimeError(f"tool endpoint answered {response.status}: {text}")
    return text


@DBOS.step()
def model_step(step: int) -> dict[str, Any]:
    """The model's answer for a step: one call to `echo` (scripted, no network)."""
    return {
        "content": [],
        "tool_calls": [{"id": f"call_{step}_1", "name": "echo", "arguments": {"text": "x"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


@DBOS.step()
def tool_step(step: int, call: dict[str, Any]) -> dict[str, Any]:
    """Runs one tool call against the HTTP endpoint and returns its result."""
    key = f"{DBOS.workflow_id}:{step}:tool0:1"
    output = post_tool(call["arguments"], key)
    return {
        "call_id": call["id"],
        "name": call["name"],
        "output": [{"type": "text", "text": output}],
        "is_error": False,
    }


@DBOS.workflow()
def turn(steps: int) -> int:
    """A Turn of `steps` model steps, each with its one tool call."""
    calls = 0
    for step in range(1, steps + 1):
        answer = model_step(step)
        for call in answer["tool_calls"]:
            result = tool_step(step, call)
            if result["output"][0]["text"] != call["arguments"]["text"]:
                raise RuntimeError(f"unexpected tool result {result}")
            calls += 1
    return calls


def run_round(workflows: int, steps: int) -> float:
    """Starts `workflows` Turns at once, waits for all, and returns the seconds it took."""
    start = time.perf_counter()
    handles = [DBOS.start_workflow(turn, steps) for _ in range(workflows)]
    for handle in handles:
        calls = handle.get_result()
        if calls != steps:
            raise RuntimeError(f"a workflow made {calls} tool calls, not {steps}")
    return time.perf_counter() - start


def main() -> None:
    global _tool
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="postgresql://... of a new database")
    parser.add_argument("--tool-url", required=True, help="the echo endpoint")
    parser.add_argument("--workflows", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--pool-size", type=int, default=None, help="sys_db_pool_size")
    parser.add_argument(
        "--handshake",
        action="store_true",
        help="print READY before the measured rounds and the JSON line after them, and wait "
        "for a line on stdin after each (so the caller can read the server's CPU time)",
    )
    args = parser.parse_args()

    url = urllib.parse.urlsplit(args.tool_url)
    _tool = (url.hostname or "127.0.0.1", url.port or 80, url.path or "/")

    config: DBOSConfig = {
        "name": "openbot-bench",
        "system_database_url": args.database_url,
        "log_level": "WARNING",
    }
    if args.pool_size:
        config["sys_db_pool_size"] = args.pool_size
    DBOS(config=config)
    DBOS.launch()
    try:
        for _ in range(args.warmup):
            run_round(args.workflows, args.steps)
        if args.handshake:
            print("READY", flush=True)
            sys.stdin.readline()
        cpu_start = time.process_time()
        seconds = [run_round(args.workflows, args.steps) for _ in range(args.rounds)]
        cpu = time.process_time() - cpu_start

        per_round = args.workflows * args.steps
        rates = [per_round / s for s in seconds]
        rate = statistics.median(rates)
        summary = {
            "framework": "dbos",
            "version": importlib.metadata.version("dbos"),
            "python": platform.python_version(),
            "workflows": args.workflows,
            "steps": args.steps,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "pool_size": args.pool_size,
            "steps_per_s": rate,
            "rounds_steps_per_s": rates,
            "dbos_steps_per_s": 2 * rate,
            "total_steps": per_round * (args.rounds + args.warmup),
            "cpu_ms_per_step": cpu * 1000 / (per_round * args.rounds),
        }
        print(json.dumps(summary), flush=True)
        if args.handshake:
            sys.stdin.readline()
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main()
