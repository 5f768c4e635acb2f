"""Reading the arguments of the hand-written client methods: IDs from objects, text as input,
tool functions as definitions. Type errors say which argument and what it must be."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Union

from . import _native
from .tools import ToolFunction, tool_definition
from .types import (
    ApprovalRequest,
    Bot,
    Chat,
    Decision,
    Execution,
    Limits,
    OutcomeDecision,
    SendReceipt,
    ToolDefinition,
    ToolResult,
)

__all__ = [
    "BotRef",
    "ChatRef",
    "ExecutionRef",
    "ApprovalRef",
    "Input",
    "ToolSpec",
    "COMPUTER_TOOLS",
]

#: The tools a Bot gets on a Computer (docs/computers.md): the four terminal tools, then the two
#: file tools, as the core declares them. Name them in ``create_bot``; their definitions come
#: from the Computer.
COMPUTER_TOOLS: tuple[str, ...] = tuple(_native.computer_tools())

#: A Bot, or its ID.
BotRef = Union[Bot, str]
#: A Chat, or its ID.
ChatRef = Union[Chat, str]
#: An execution, a receipt naming one (a Turn), or its ID.
ExecutionRef = Union[Execution, SendReceipt, str]
#: An approval request, or its ID.
ApprovalRef = Union[ApprovalRequest, str]
#: Input for a Chat: text, or content parts (``{"type": "text", "text": ...}``).
Input = Union[str, Sequence[Mapping[str, Any]]]
#: A Bot's tool: the name of a function given to ``connect``, a function, a definition, or its
#: dict form.
ToolSpec = Union[str, ToolDefinition, Mapping[str, Any], Callable[..., Any]]


def _type_name(value: object) -> str:
    return type(value).__name__


def _bot_id(bot: BotRef) -> str:
    if isinstance(bot, Bot):
        return bot.id
    if isinstance(bot, str):
        return bot
    raise TypeError(f"expected a Bot or a Bot ID (str), not {_type_name(bot)}")


def _chat_id(chat: ChatRef) -> str:
    if isinstance(chat, Chat):
        return chat.id
    if isinstance(chat, str):
        return chat
    raise TypeError(f"expected a Chat or a Chat ID (str), not {_type_name(chat)}")


def _execution_id(execution: ExecutionRef) -> str:
    if isinstance(execution, Execution):
        return execution.id
    if isinstance(execution, SendReceipt):
        return execution.execution_id
    if isinstance(execution, str):
        return execution
    raise TypeError(
        f"expected an Execution, a SendReceipt or an execution ID (str), not {_type_name(execution)}"
    )


def _request_id(request: ApprovalRef) -> str:
    if isinstance(request, ApprovalRequest):
        return request.id
    if isinstance(request, str):
        return request
    raise TypeError(
        f"expected an ApprovalRequest or an approval request ID (str), not {_type_name(request)}"
    )


def _decision(decision: Decision, reason: str | None) -> dict[str, Any]:
    _check("decision", decision, str, "a str ('approve' or 'deny')")
    if reason is not None:
        _check("reason", reason, str, "a str")
    return {"decision": decision, "reason": reason}


def _outcome(
    call: str, decision: OutcomeDecision, result: str | None, reason: str | None
) -> dict[str, Any]:
    _check("call", call, str, "a str (the call as listed, e.g. '1/tool:0/1')")
    _check("decision", decision, str, "a str ('applied', 'not_applied' or 'give_up')")
    data: dict[str, Any] = {"call": call, "decision": decision}
    for name, value in (("result", result), ("reason", reason)):
        if value is not None:
            _check(name, value, str, "a str")
            data[name] = value
    return data


def _check(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise TypeError(f"{name} must be {what}, not {_type_name(value)}")


def _tool(tool: ToolSpec, known: Mapping[str, ToolFunction]) -> dict[str, Any]:
    if isinstance(tool, str):
        function = known.get(tool)
        if function is None and tool in COMPUTER_TOOLS:
            # The attached Computer gives the definition.
            return {"name": tool, "input_schema": {"type": "object"}}
        if function is None:
            raise ValueError(
                f"no tool function named {tool!r} was given to connect (it has: {sorted(known)})"
            )
        return tool_definition(function, name=tool).to_dict()
    if isinstance(tool, ToolDefinition):
        return tool.to_dict()
    if isinstance(tool, Mapping):
        return dict(tool)
    if callable(tool):
        return tool_definition(tool).to_dict()
    raise TypeError(
        f"a tool must be a name, a function, a ToolDefinition or a dict, not {_type_name(tool)}"
    )


def _limits(limits: Limits | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if limits is None:
        return None
    if isinstance(limits, Limits):
        return limits.to_dict()
    if isinstance(limits, Mapping):
        return dict(limits)
    raise TypeError(f"limits must be a Limits or a dict, not {_type_name(limits)}")


def _tools(
    tools: Sequence[ToolSpec] | None, known: Mapping[str, ToolFunction]
) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise TypeError(f"tools must be a list, not {_type_name(tools)}")
    return [_tool(t, known) for t in tools]


def _bot_spec(
    name: str,
    model: str,
    instructions: str,
    tools: Sequence[ToolSpec] | None,
    limits: Limits | Mapping[str, Any] | None,
    shared: bool,
    known: Mapping[str, ToolFunction],
) -> dict[str, Any]:
    """The fields of a BotSpec. ``tools`` None: every function given to ``connect``."""
    _check("name", name, str, "a str")
    _check("model", model, str, "a str")
    _check("instructions", instructions, str, "a str")
    _check("shared", shared, bool, "a bool")
    chosen = _tools(list(known) if tools is None else tools, known)
    return {
        "name": name,
        "model": model,
        "instructions": instructions,
        "tools": chosen,
        "shared": shared,
        "limits": _limits(limits),
    }


def _bot_update(
    revision: int | None,
    name: str | None,
    instructions: str | None,
    model: str | None,
    tools: Sequence[ToolSpec] | None,
    limits: Limits | Mapping[str, Any] | None,
    shared: bool | None,
    known: Mapping[str, ToolFunction],
) -> dict[str, Any]:
    for label, value, kind, what in (
        ("revision", revision, int, "an int"),
        ("name", name, str, "a str"),
        ("instructions", instructions, str, "a str"),
        ("model", model, str, "a str"),
        ("shared", shared, bool, "a bool"),
    ):
        if value is not None:
            _check(label, value, kind, what)
    return {
        "revision": revision,
        "name": name,
        "instructions": instructions,
        "model": model,
        "tools": _tools(tools, known),
        "limits": _limits(limits),
        "shared": shared,
    }


def _input(input: Input, command_key: str | None) -> dict[str, Any]:
    if isinstance(input, str):
        content: list[Any] = [{"type": "text", "text": input}]
    elif isinstance(input, Sequence) and not isinstance(input, (bytes, bytearray)):
        content = [dict(part) if isinstance(part, Mapping) else part for part in input]
        for part in content:
            if not isinstance(part, dict):
                raise TypeError(f"a content part must be a dict, not {_type_name(part)}")
    else:
        raise TypeError(f"input must be a str or a list of content parts, not {_type_name(input)}")
    if command_key is not None:
        _check("command_key", command_key, str, "a str")
    return {"content": content, "command_key": command_key}


def _tool_result(result: ToolResult | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(result, ToolResult):
        return result.to_dict()
    if isinstance(result, Mapping):
        return dict(result)
    raise TypeError(f"result must be a ToolResult or a dict, not {_type_name(result)}")


def _after(after: int) -> int:
    _check("after", after, int, "an int")
    if after < 0:
        raise ValueError("after must be 0 or more")
    return after


def _uri(uri: str, token: str | None) -> None:
    _check("uri", uri, str, "a str")
    if token is not None:
        _check("token", token, str, "a str")




def _computer(computer: Mapping[str, Any] | None) -> tuple[list[str], bool] | None:
    """``connect``'s ``computer``: ``{"folders": [...], "terminal": bool}``."""
    if computer is None:
        return None
    if not isinstance(computer, Mapping):
        raise TypeError(f"computer must be a dict, not {_type_name(computer)}")
    unknown = set(computer) - {"folders", "terminal"}
    if unknown:
        raise TypeError(f"computer has unknown keys: {sorted(unknown)}")
    folders = computer.get("folders")
    if isinstance(folders, (str, bytes)) or not isinstance(folders, Sequence):
        raise TypeError(f"computer['folders'] must be a list, not {_type_name(folders)}")
    paths = []
    for folder in folders:
        if not isinstance(folder, str) and not hasattr(folder, "__fspath__"):
            raise TypeError(f"a computer folder must be a str or path, not {_type_name(folder)}")
        paths.append(str(folder))
    terminal = computer.get("terminal", True)
    _check("computer['terminal']", terminal, bool, "a bool")
    return paths, terminal
