"""Loop overhead per model step of LangGraph (pip `langgraph`), a baseline of
`scripts/bench-python`; the same Turn as `openbot_loop.py` and `openai_agents_loop.py`.

LangGraph's prebuilt ReAct agent (`create_react_agent`: a model node and a `ToolNode`) with one
tool `echo(text)` and a fake chat model that answers `steps - 1` times with one call to `echo`,
then with the text "done" (one counter across Turns, like the scripted model). No network. Each
round runs `turns` Turns with `ainvoke`; the figure is the median over rounds of
(round time / model steps).

Prints one JSON line: {"sdk": "langgraph", "version": ..., "us_per_step": ..., ...}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
import warnings
from importlib.metadata import version
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


@tool
def echo(text: str) -> str:
    """Repeats the text."""
    return text


class ScriptedChatModel(BaseChatModel):
    """Answers each request with the next step of a fixed script, starting again after the
    last: `steps - 1` calls to `echo`, then the text "done"."""

    steps: int
    next: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _answer(self) -> ChatResult:
        index = self.next
        self.next += 1
        if index % self.steps < self.steps - 1:
            message = AIMessage(
                content="",
                tool_calls=[{"id": f"call_{index + 1}_1", "name": "echo", "args": {"text": "x"}}],
            )
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer()

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer()


async def run_turns(agent: Any, turns: int) -> None:
    for _ in range(turns):
        result = await agent.ainvoke({"messages": [("user", "Say x, then done.")]})
        if result["messages"][-1].content != "done":
            raise RuntimeError(f"unexpected final message {result['messages'][-1]!r}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="model steps per Turn (>= 2)")
    parser.add_argument("--turns", type=int, default=20, help="Turns per round")
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=50, help="Turns before measuring")
    args = parser.parse_args()
    if args.steps < 2 or args.turns < 1 or args.rounds < 1:
        parser.error("--steps must be at least 2, --turns and --rounds at least 1")

    model = ScriptedChatModel(steps=args.steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [echo], prompt="Be brief.")
    await run_turns(agent, args.warmup)
    if model.next != args.warmup * args.steps:
        raise RuntimeError(f"expected {args.warmup * args.steps} model calls, got {model.next}")

    rounds_us = []
    rounds_cpu_us = []
    for _ in range(args.rounds):
        start, cpu = time.perf_counter_ns(), time.process_time_ns()
        await run_turns(agent, args.turns)
        elapsed = time.perf_counter_ns() - start
        rounds_us.append(elapsed / 1000 / (args.turns * args.steps))
        rounds_cpu_us.append((time.process_time_ns() - cpu) / 1000 / (args.turns * args.steps))

    print(
        json.dumps(
            {
                "sdk": "langgraph",
                "version": version("langgraph"),
                "python": platform.python_version(),
                "us_per_step": statistics.median(rounds_us),
                "rounds_us_per_step": rounds_us,
                "cpu_us_per_step": statistics.median(rounds_cpu_us),
                "steps": args.steps,
                "turns": args.turns,
                "rounds": args.rounds,
                "warmup": args.warmup,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
