"""Loop overhead per model step of the OpenBot Python SDK (memory mode), the Python side of
`scripts/bench-python`; the same Turn as `openai_agents_loop.py` and `langgraph_loop.py`.

A Bot with one Python function tool `echo(text)` and a scripted model that answers `steps - 1`
times with one call to `echo`, then with the text "done" (the script repeats, one counter across
Turns). Each Turn is sent and read to its end (`observe`), so a step includes the Rust loop,
the Python tool call (on a worker thread, taking the GIL) and the events handed to Python.
The figure is the median over rounds of (round time / model steps). Also measures one call of
the no-op native function (`openbot_platform._native.noop`) in nanoseconds, and the mean time of one
`get_bot` call (a round trip through the runtime) in microseconds.

Prints one JSON line: {"sdk": "openbot", "api": ..., "us_per_step": ..., "noop_ns": ..., ...}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
import timeit

import openbot_platform as openbot


def echo(text: str) -> str:
    """Repeats the text."""
    return text


def script_file(steps: int) -> str:
    call = {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}
    script = {"steps": [call] * (steps - 1) + [{"text": "done"}], "repeat": True}
    handle, path = tempfile.mkstemp(suffix=".json", prefix="openbot-bench-")
    with os.fdopen(handle, "w") as file:
        json.dump(script, file)
    return path


def check(events: list[openbot.Event], steps: int) -> None:
    starts = sum(1 for e in events if e.type == "model_step_started")
    if starts != steps or events[-1].outcome != "completed":
        raise RuntimeError(f"unexpected Turn: {starts} steps, last event {events[-1]!r}")


def run_sync(client: openbot.Client, bot: openbot.Bot, turns: int, steps: int) -> None:
    for _ in range(turns):
        receipt = client.send(client.create_chat(bot), "Say x, then done.")
        check(list(client.observe(receipt)), steps)


async def run_async(client: openbot.AsyncClient, bot: openbot.Bot, turns: int, steps: int) -> None:
    for _ in range(turns):
        receipt = await client.send(await client.create_chat(bot), "Say x, then done.")
        check([e async for e in await client.observe(receipt)], steps)


CALLS = 2000


def sync_call_us(client: openbot.Client, bot: openbot.Bot) -> float:
    start = time.perf_counter_ns()
    for _ in range(CALLS):
        client.get_bot(bot)
    return (time.perf_counter_ns() - start) / 1000 / CALLS


async def async_call_us(client: openbot.AsyncClient, bot: openbot.Bot) -> float:
    start = time.perf_counter_ns()
    for _ in range(CALLS):
        await client.get_bot(bot)
    return (time.perf_counter_ns() - start) / 1000 / CALLS


def noop_ns(repeats: int = 7, number: int = 200_000) -> float:
    timings = timeit.repeat(openbot._native.noop, repeat=repeats, number=number)
    return min(timings) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--api", choices=["sync", "async"], default="async")
    parser.add_argument("--steps", type=int, default=10, help="model steps per Turn (>= 2)")
    parser.add_argument("--turns", type=int, default=20, help="Turns per round")
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=50, help="Turns before measuring")
    args = parser.parse_args()
    if args.steps < 2 or args.turns < 1 or args.rounds < 1:
        parser.error("--steps must be at least 2, --turns and --rounds at least 1")

    model = f"scripted:{script_file(args.steps)}"
    rounds_us: list[float] = []
    rounds_cpu_us: list[float] = []
    call_us = 0.0
    # Each Turn runs in a Chat of its own (created in the measured time), like the baselines'
    # `Runner.run` / `invoke` with fresh input: no history grows across Turns.
    if args.api == "sync":
        with openbot.connect_sync("memory://", tools={"echo": echo}) as client:
            bot = client.create_bot(name="bench", instructions="Be brief.", model=model, tools=[echo])
            run_sync(client, bot, args.warmup, args.steps)
            for _ in range(args.rounds):
                start, cpu = time.perf_counter_ns(), time.process_time_ns()
                run_sync(client, bot, args.turns, args.steps)
                rounds_us.append((time.perf_counter_ns() - start) / 1000 / (args.turns * args.steps))
                rounds_cpu_us.append((time.process_time_ns() - cpu) / 1000 / (args.turns * args.steps))
            call_us = sync_call_us(client, bot)
    else:

        async def measure() -> None:
            async with await openbot.connect("memory://", tools={"echo": echo}) as client:
                bot = await client.create_bot(
                    name="bench", instructions="Be brief.", model=model, tools=[echo]
                )
                await run_async(client, bot, args.warmup, args.steps)
                for _ in range(args.rounds):
                    start, cpu = time.perf_counter_ns(), time.process_time_ns()
                    await run_async(client, bot, args.turns, args.steps)
                    elapsed = time.perf_counter_ns() - start
                    rounds_us.append(elapsed / 1000 / (args.turns * args.steps))
                    rounds_cpu_us.append((time.process_time_ns() - cpu) / 1000 / (args.turns * args.steps))
                nonlocal call_us
                call_us = await async_call_us(client, bot)

        asyncio.run(measure())

    print(
        json.dumps(
            {
                "sdk": "openbot",
                "api": args.api,
                "version": openbot.__version__,
                "python": platform.python_version(),
                "us_per_step": statistics.median(rounds_us),
                "rounds_us_per_step": rounds_us,
                "cpu_us_per_step": statistics.median(rounds_cpu_us),
                "noop_ns": noop_ns(),
                "get_bot_us": call_us,
                "steps": args.steps,
                "turns": args.turns,
                "rounds": args.rounds,
                "warmup": args.warmup,
            }
        )
    )


if __name__ == "__main__":
    main()
