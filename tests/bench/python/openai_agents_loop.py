"""Loop overhead per model step of the OpenAI Agents SDK (pip `openai-agents`), the baseline
of `tests/bench/src/loop_overhead.rs`.

The same Turn as the Rust benchmark, with no network: an Agent with one function tool
`echo(text)` and a custom Model that answers `steps - 1` times with one call to `echo`, then
with a final text message. Tracing is disabled. Each round runs `turns` Turns with
`Runner.run`; the figure is the median over rounds of (round time / model steps).

Prints one JSON line:
{"sdk": "openai-agents", "version": ..., "us_per_step": ..., "steps": ..., "turns": ..., ...}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import agents
from agents import Agent, ModelResponse, ModelSettings, Runner, Usage, function_tool
from agents.models.interface import Model, ModelTracing
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails


@function_tool
def echo(text: str) -> str:
    """Repeats the text."""
    return text


class ScriptedModel(Model):
    """Answers each request with the next step of a fixed script, starting again after the last:
    `steps - 1` calls to `echo`, then the text "done". Like the Rust `ScriptedModel::repeating`,
    one counter across Turns; the Turns of this benchmark run one after another."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.next = 0

    def _output(self) -> list[Any]:
        index = self.next
        self.next += 1
        position = index % self.steps
        if position < self.steps - 1:
            call_id = f"call_{index + 1}_1"
            return [
                ResponseFunctionToolCall(
                    id=call_id,
                    call_id=call_id,
                    type="function_call",
                    name="echo",
                    arguments='{"text":"x"}',
                )
            ]
        return [
            ResponseOutputMessage(
                id=f"msg_{index + 1}",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(text="done", type="output_text", annotations=[])],
            )
        ]

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        return ModelResponse(
            output=self._output(),
            usage=Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15),
            response_id=None,
        )

    async def stream_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[Any]:
        # Not used by this benchmark (Runner.run asks get_response); the whole answer as one
        # completed event, so that Runner.run_streamed would work too.
        response = Response(
            id=f"resp_{self.next + 1}",
            created_at=0,
            model="scripted",
            object="response",
            output=self._output(),
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
            usage=ResponseUsage(
                input_tokens=10,
                input_tokens_details=InputTokensDetails(cached_tokens=0),
                output_tokens=5,
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
                total_tokens=15,
            ),
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


async def run_turns(agent: Agent[Any], turns: int, steps: int) -> None:
    for _ in range(turns):
        result = await Runner.run(agent, "Say x, then done.", max_turns=steps)
        if result.final_output != "done":
            raise RuntimeError(f"unexpected final output {result.final_output!r}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="model steps per Turn (>= 1)")
    parser.add_argument("--turns", type=int, default=20, help="Turns per round")
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=50, help="Turns before measuring")
    args = parser.parse_args()
    if args.steps < 1 or args.turns < 1 or args.rounds < 1:
        parser.error("--steps, --turns and --rounds must be at least 1")

    agents.set_tracing_disabled(True)
    model = ScriptedModel(args.steps)
    agent = Agent(name="bench", instructions="Be brief.", model=model, tools=[echo])

    await run_turns(agent, args.warmup, args.steps)
    if model.next != args.warmup * args.steps:
        raise RuntimeError(f"expected {args.warmup * args.steps} model calls, got {model.next}")

    rounds_us = []
    for _ in range(args.rounds):
        start = time.perf_counter_ns()
        await run_turns(agent, args.turns, args.steps)
        elapsed = time.perf_counter_ns() - start
        rounds_us.append(elapsed / 1000 / (args.turns * args.steps))

    print(
        json.dumps(
            {
                "sdk": "openai-agents",
                "version": agents.__version__,
                "python": platform.python_version(),
                "us_per_step": statistics.median(rounds_us),
                "rounds_us_per_step": rounds_us,
                "steps": args.steps,
                "turns": args.turns,
                "rounds": args.rounds,
                "warmup": args.warmup,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
