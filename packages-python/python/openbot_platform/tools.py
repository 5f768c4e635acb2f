"""Python functions as tools.

``connect(uri, tools={"add": add})`` offers a function to the Bots whose tool list names it.
The model's arguments are passed as keyword arguments; the return value becomes the result
text (a ``str`` as is, ``None`` as an empty text, anything else as JSON). An exception raised
by the function gives the model an error result with the exception's message, and the Turn
goes on.

:func:`tool_definition` builds the definition a Bot lists from a function's signature.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .types import ToolDefinition

__all__ = ["tool_definition", "ToolFunction"]

#: A function usable as a tool: sync or async, called with the model's arguments as keywords.
ToolFunction = Callable[..., Any]

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}


def _schema_of(annotation: Any) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _schema_of(options[0]) if len(options) == 1 else {}
    base = origin if origin is not None else annotation
    kind = _JSON_TYPES.get(base)
    return {"type": kind} if kind else {}


def tool_definition(
    function: ToolFunction, *, name: str | None = None, description: str | None = None
) -> ToolDefinition:
    """The definition of a tool calling ``function``: its name (the function's name unless
    given), its description (the docstring unless given) and a JSON Schema of its parameters
    read from their annotations (``str``, ``int``, ``float``, ``bool``, ``list``, ``dict``);
    parameters without a default are required."""
    if not callable(function):
        raise TypeError(f"tool_definition() needs a function, not {type(function).__name__}")
    try:
        hints = typing.get_type_hints(function)
    except Exception:
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[parameter.name] = _schema_of(hints.get(parameter.name, parameter.annotation))
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return ToolDefinition(
        name=name or str(getattr(function, "__name__", "tool")),
        description=description
        if description is not None
        else inspect.cleandoc(function.__doc__ or ""),
        input_schema=schema,
    )


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, default=str)


def _call(function: ToolFunction, arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return function(**arguments)
    return function(arguments)


def _is_async(function: ToolFunction) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)
    )


def native_tools(tools: Mapping[str, ToolFunction] | None, *, sync: bool) -> list[tuple[str, Any, bool]]:
    """The tools as the native module takes them: ``(name, wrapped function, is_async)``.
    With ``sync`` set, async functions run to completion with ``asyncio.run`` on the tool's
    worker thread (a fresh event loop there, never nested in the caller's)."""
    if tools is None:
        return []
    if not isinstance(tools, Mapping):
        raise TypeError(f"tools must be a dict of name -> function, not {type(tools).__name__}")
    wrapped: list[tuple[str, Any, bool]] = []
    for name, function in tools.items():
        if not isinstance(name, str):
            raise TypeError(f"a tool name must be a str, not {type(name).__name__}")
        if not callable(function):
            raise TypeError(f"tool {name!r} must be a function, not {type(function).__name__}")
        if _is_async(function):
            if sync:

                def run_to_end(arguments: Any, function: ToolFunction = function) -> str:
                    result = asyncio.run(_call(function, arguments))
                    return _result_text(result)

                wrapped.append((name, run_to_end, False))
            else:

                async def run_async(arguments: Any, function: ToolFunction = function) -> str:
                    awaitable: Awaitable[Any] = _call(function, arguments)
                    return _result_text(await awaitable)

                wrapped.append((name, run_async, True))
        else:

            def run(arguments: Any, function: ToolFunction = function) -> str:
                return _result_text(_call(function, arguments))

            wrapped.append((name, run, False))
    return wrapped
