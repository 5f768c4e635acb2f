"""The Client, in two forms with the same methods: :class:`AsyncClient` (asyncio) and
:class:`Client` (blocking; waits with the GIL released, so other Python threads run).

``memory://`` runs everything in this process; ``http://host:port`` talks to a server. The
same code works against both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Callable, Union

from . import _bridge, _native
from .tools import ToolFunction, native_tools, tool_definition
from .types import (
    ApprovalRequest,
    ApprovalState,
    Bot,
    Chat,
    ChatEntry,
    Decision,
    Event,
    Execution,
    Limits,
    OutcomeDecision,
    OutcomeDecisionRecord,
    SendReceipt,
    ToolDefinition,
    ToolResult,
    UnknownOutcomePage,
)

__all__ = [
    "AsyncClient",
    "Client",
    "AsyncEventStream",
    "EventStream",
    "connect",
    "connect_sync",
    "BotRef",
    "ChatRef",
    "ExecutionRef",
    "ApprovalRef",
    "Input",
    "ToolSpec",
]

#: A Bot, or its ID.
BotRef = Union[Bot, str]
#: A Chat, or its ID.
ChatRef = Union[Chat, str]
#: An execution, a receipt naming one, or its ID.
ExecutionRef = Union[Execution, SendReceipt, str]
#: An approval request, or its ID.
ApprovalRef = Union[ApprovalRequest, str]
#: Input for a Chat: text, or content parts (``{"type": "text", "text": ...}``).
Input = Union[str, Sequence[Mapping[str, Any]]]
#: A Bot's tool: a definition, its dict form, or a function (see :func:`tool_definition`).
ToolSpec = Union[ToolDefinition, Mapping[str, Any], Callable[..., Any]]

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


def _state(state: ApprovalState | None) -> str | None:
    if state is not None:
        _check("state", state, str, "a str")
    return state


def _decision(decision: Decision, reason: str | None) -> dict[str, Any]:
    _check("decision", decision, str, "a str ('approve' or 'deny')")
    data: dict[str, Any] = {"decision": decision}
    if reason is not None:
        _check("reason", reason, str, "a str")
        data["reason"] = reason
    return data


def _page(limit: int | None, cursor: str | None) -> tuple[int | None, str | None]:
    if limit is not None:
        _check("limit", limit, int, "an int")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
    if cursor is not None:
        _check("cursor", cursor, str, "a str")
    return limit, cursor


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


def _enabled(mode: Any) -> bool:
    return bool(mode["enabled"])


def _check(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise TypeError(f"{name} must be {what}, not {_type_name(value)}")


def _tool(tool: ToolSpec) -> dict[str, Any]:
    if isinstance(tool, ToolDefinition):
        return tool.to_dict()
    if isinstance(tool, Mapping):
        return dict(tool)
    if callable(tool):
        return tool_definition(tool).to_dict()
    raise TypeError(f"a tool must be a ToolDefinition, a dict or a function, not {_type_name(tool)}")


def _limits(limits: Limits | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if limits is None:
        return None
    if isinstance(limits, Limits):
        return limits.to_dict()
    if isinstance(limits, Mapping):
        return dict(limits)
    raise TypeError(f"limits must be a Limits or a dict, not {_type_name(limits)}")


def _tools(tools: Sequence[ToolSpec] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise TypeError(f"tools must be a list, not {_type_name(tools)}")
    return [_tool(t) for t in tools]


def _bot_spec(
    name: str,
    model: str,
    instructions: str,
    tools: Sequence[ToolSpec],
    limits: Limits | Mapping[str, Any] | None,
    shared: bool,
) -> dict[str, Any]:
    _check("name", name, str, "a str")
    _check("model", model, str, "a str")
    _check("instructions", instructions, str, "a str")
    _check("shared", shared, bool, "a bool")
    spec: dict[str, Any] = {
        "name": name,
        "model": model,
        "instructions": instructions,
        "tools": _tools(tools),
        "shared": shared,
    }
    limit_dict = _limits(limits)
    if limit_dict is not None:
        spec["limits"] = limit_dict
    return spec


def _bot_update(
    revision: int | None,
    name: str | None,
    instructions: str | None,
    model: str | None,
    tools: Sequence[ToolSpec] | None,
    limits: Limits | Mapping[str, Any] | None,
    shared: bool | None,
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
    update = {
        "revision": revision,
        "name": name,
        "instructions": instructions,
        "model": model,
        "tools": _tools(tools),
        "limits": _limits(limits),
        "shared": shared,
    }
    return {k: v for k, v in update.items() if v is not None}


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
    data: dict[str, Any] = {"content": content}
    if command_key is not None:
        _check("command_key", command_key, str, "a str")
        data["command_key"] = command_key
    return data


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


class AsyncEventStream:
    """The events of one execution, as an async iterator that ends after the execution's last
    event. ``aclose()`` (or leaving ``async with``) stops reading; it cancels nothing."""

    def __init__(self, native: _native.NativeEvents) -> None:
        self._native = native
        self._buffer: list[Event] = []
        self._index = 0

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        if self._index >= len(self._buffer):
            native = self._native
            batch = await _bridge.call(lambda bridge, ticket: native.next_async(bridge, ticket))
            if batch is None:
                raise StopAsyncIteration
            self._buffer = [Event.from_dict(e) for e in batch]
            self._index = 0
        event = self._buffer[self._index]
        self._index += 1
        return event

    async def aclose(self) -> None:
        """Stops reading."""
        self._native.close()
        self._buffer = []
        self._index = 0

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class EventStream:
    """The events of one execution, as an iterator that ends after the execution's last event.
    Each wait releases the GIL. ``close()`` (or leaving ``with``) stops reading; it cancels
    nothing."""

    def __init__(self, native: _native.NativeEvents) -> None:
        self._native = native
        self._buffer: list[Event] = []
        self._index = 0

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        if self._index >= len(self._buffer):
            batch = self._native.next_sync()
            if batch is None:
                raise StopIteration
            self._buffer = [Event.from_dict(e) for e in batch]
            self._index = 0
        event = self._buffer[self._index]
        self._index += 1
        return event

    def close(self) -> None:
        """Stops reading."""
        self._native.close()
        self._buffer = []
        self._index = 0

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient:
    """The asyncio Client. Make one with :func:`openbot.connect`."""

    def __init__(self, native: _native.NativeClient, uri: str) -> None:
        self._native = native
        self.uri = uri

    def __repr__(self) -> str:
        return f"AsyncClient({self.uri!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @classmethod
    async def connect(
        cls,
        uri: str,
        *,
        token: str | None = None,
        tools: Mapping[str, ToolFunction] | None = None,
    ) -> AsyncClient:
        """The same as :func:`openbot.connect`."""
        return await connect(uri, token=token, tools=tools)

    async def _call(self, op: str, a: Any = None, b: Any = None) -> Any:
        native = self._native
        return await _bridge.call(lambda bridge, ticket: native.call_async(bridge, ticket, op, a, b))

    async def create_bot(
        self,
        *,
        name: str,
        model: str,
        instructions: str = "",
        tools: Sequence[ToolSpec] = (),
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool = False,
    ) -> Bot:
        """Creates a Bot. ``model`` is ``provider:model`` (``openai:gpt-4o-mini``,
        ``scripted:/abs/path.json``, ...); ``tools`` lists what the model may call."""
        spec = _bot_spec(name, model, instructions, tools, limits, shared)
        return Bot.from_dict(await self._call("create_bot", spec))

    async def get_bot(self, bot: BotRef) -> Bot:
        """Reads a Bot."""
        return Bot.from_dict(await self._call("get_bot", _bot_id(bot)))

    async def list_bots(self) -> list[Bot]:
        """The Bots, oldest first."""
        return [Bot.from_dict(b) for b in await self._call("list_bots")]

    async def update_bot(
        self,
        bot: BotRef,
        *,
        revision: int | None = None,
        name: str | None = None,
        instructions: str | None = None,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool | None = None,
    ) -> Bot:
        """Changes a Bot; fields left ``None`` stay. With ``revision`` set, fails with
        :class:`ConflictError` if the Bot changed since that revision."""
        update = _bot_update(revision, name, instructions, model, tools, limits, shared)
        return Bot.from_dict(await self._call("update_bot", _bot_id(bot), update))

    async def delete_bot(self, bot: BotRef) -> None:
        """Deletes a Bot that has no Chats left."""
        await self._call("delete_bot", _bot_id(bot))

    async def create_chat(self, bot: BotRef) -> Chat:
        """Creates a Chat with a Bot."""
        return Chat.from_dict(await self._call("create_chat", _bot_id(bot)))

    async def get_chat(self, chat: ChatRef) -> Chat:
        """Reads a Chat."""
        return Chat.from_dict(await self._call("get_chat", _chat_id(chat)))

    async def send(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> SendReceipt:
        """Sends input: it starts a Turn, or waits in order for its own Turn while one runs.
        A retry with the same ``command_key`` and input returns the same receipt."""
        data = _input(input, command_key)
        return SendReceipt.from_dict(await self._call("send", _chat_id(chat), data))

    async def steer(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> SendReceipt:
        """Sends input that joins the running Turn; with no Turn running it starts one."""
        data = _input(input, command_key)
        return SendReceipt.from_dict(await self._call("steer", _chat_id(chat), data))

    async def stop(self, chat: ChatRef) -> None:
        """Stops the running Turn; queued input then runs."""
        await self._call("stop", _chat_id(chat))

    async def delete_chat(self, chat: ChatRef) -> None:
        """Deletes a Chat: closes it to input, cancels its Turns, returns once they ended."""
        await self._call("delete_chat", _chat_id(chat))

    async def history(self, chat: ChatRef) -> list[ChatEntry]:
        """The Chat's messages, oldest first."""
        return [ChatEntry.from_dict(e) for e in await self._call("history", _chat_id(chat))]

    async def get_execution(self, execution: ExecutionRef) -> Execution:
        """Reads an execution."""
        return Execution.from_dict(await self._call("get_execution", _execution_id(execution)))

    async def observe(self, execution: ExecutionRef, after: int = 0) -> AsyncEventStream:
        """The execution's events after sequence ``after``, ending after its last event."""
        id, cursor, client = _execution_id(execution), _after(after), self._native
        native = await _bridge.call(lambda bridge, ticket: client.observe_async(bridge, ticket, id, cursor))
        return AsyncEventStream(native)

    async def wait(self, execution: ExecutionRef) -> Execution:
        """Waits until the execution has ended (reading its events) and returns it."""
        stream = await self.observe(execution)
        async for _ in stream:
            pass
        return await self.get_execution(execution)

    async def cancel_execution(self, execution: ExecutionRef) -> Execution:
        """Asks an execution to stop; returns its state (``cancelling`` or an end state)."""
        return Execution.from_dict(await self._call("cancel_execution", _execution_id(execution)))

    async def deliver_tool_result(
        self, execution: ExecutionRef, result: ToolResult | Mapping[str, Any]
    ) -> None:
        """Delivers the result of a tool call the execution waits for (a Bot tool with no
        function given to ``connect``)."""
        await self._call("deliver_tool_result", _execution_id(execution), _tool_result(result))

    async def list_approvals(self, state: ApprovalState | None = None) -> list[ApprovalRequest]:
        """The approval requests you may decide, newest first; with ``state`` (``"pending"``,
        ``"approved"``, ...) only those in it. Only a server has approval rules: in memory
        nothing asks, so the list is empty."""
        wanted = _state(state)
        return [ApprovalRequest.from_dict(r) for r in await self._call("list_approvals", wanted)]

    async def decide_approval(
        self, request: ApprovalRef, decision: Decision, reason: str | None = None
    ) -> ApprovalRequest:
        """Decides a pending approval request and returns it as decided. ``"approve"`` runs
        the call once, in its child execution, whose result reaches the Chat as a notice;
        ``"deny"`` never runs it, and the model is told (with ``reason``). A request that is
        no longer pending raises :class:`ConflictError`, an unknown one (always, in memory)
        :class:`NotFoundError`."""
        id, data = _request_id(request), _decision(decision, reason)
        return ApprovalRequest.from_dict(await self._call("decide_approval", id, data))

    async def list_unknown_outcomes(
        self, limit: int | None = None, cursor: str | None = None
    ) -> UnknownOutcomePage:
        """Your executions that wait in ``outcome_unknown`` for a decision (a write without a
        safe retry rule lost its answer), oldest first: a page of up to ``limit`` (1-200, the
        server's default 50) after ``cursor`` (the ``next_cursor`` of the page before), each
        with its call's key, tool and the arguments it was sent with. Only a server loses a
        call's answer: in memory the page is empty."""
        wanted = _page(limit, cursor)
        return UnknownOutcomePage.from_dict(await self._call("list_unknown_outcomes", *wanted))

    async def decide_outcome(
        self,
        execution: ExecutionRef,
        call: str,
        decision: OutcomeDecision,
        result: str | None = None,
        reason: str | None = None,
    ) -> OutcomeDecisionRecord:
        """Decides ``call``, the call ``execution`` waits for in ``outcome_unknown``, and
        returns the decision's audit entry. ``"applied"`` (with ``result``): the result becomes
        the call's and the work goes on with it, the call is not sent again;
        ``"not_applied"``: the call is sent again, as a new attempt; ``"give_up"``: the
        execution ends ``failed``, sending nothing. A decision for another call, or a second
        one, raises :class:`ConflictError`; in memory this raises :class:`InvalidInputError`
        (only a server has unknown outcomes)."""
        id, data = _execution_id(execution), _outcome(call, decision, result, reason)
        return OutcomeDecisionRecord.from_dict(await self._call("decide_outcome", id, data))

    async def pause_execution(self, execution: ExecutionRef) -> Execution:
        """Pauses an execution: it sends nothing new until resumed (its state is
        ``waiting``); returns its state. Only a server pauses: in memory this raises
        :class:`InvalidInputError`."""
        return Execution.from_dict(await self._call("pause_execution", _execution_id(execution)))

    async def resume_execution(self, execution: ExecutionRef) -> Execution:
        """Resumes a paused execution; returns its state. In memory this raises
        :class:`InvalidInputError`."""
        return Execution.from_dict(await self._call("resume_execution", _execution_id(execution)))

    async def plan_mode(self, chat: ChatRef) -> bool:
        """Whether a Chat is in plan mode (always ``False`` in memory)."""
        return _enabled(await self._call("plan_mode", _chat_id(chat)))

    async def set_plan_mode(self, chat: ChatRef, enabled: bool) -> bool:
        """Turns a Chat's plan mode on or off; returns the mode now in force. In plan mode
        the Bot may only call the built-in ``propose_plan`` tool; approving its plan turns
        plan mode off. Only a server has plan mode: turning it on in memory raises
        :class:`InvalidInputError`."""
        _check("enabled", enabled, bool, "a bool")
        return _enabled(await self._call("set_plan_mode", _chat_id(chat), enabled))

    async def close(self) -> None:
        """Closes the client: later calls raise :class:`ClosedError`; in memory mode running
        Turns are cancelled."""
        native = self._native
        await _bridge.call(lambda bridge, ticket: native.close_async(bridge, ticket))


class Client:
    """The blocking Client. Make one with :func:`openbot.connect_sync`. Every call waits with
    the GIL released; Ctrl-C (KeyboardInterrupt) interrupts a wait."""

    def __init__(self, native: _native.NativeClient, uri: str) -> None:
        self._native = native
        self.uri = uri

    def __repr__(self) -> str:
        return f"Client({self.uri!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @classmethod
    def connect(
        cls,
        uri: str,
        *,
        token: str | None = None,
        tools: Mapping[str, ToolFunction] | None = None,
    ) -> Client:
        """The same as :func:`openbot.connect_sync`."""
        return connect_sync(uri, token=token, tools=tools)

    def _call(self, op: str, a: Any = None, b: Any = None) -> Any:
        return self._native.call_sync(op, a, b)

    def create_bot(
        self,
        *,
        name: str,
        model: str,
        instructions: str = "",
        tools: Sequence[ToolSpec] = (),
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool = False,
    ) -> Bot:
        """Creates a Bot (see :meth:`AsyncClient.create_bot`)."""
        spec = _bot_spec(name, model, instructions, tools, limits, shared)
        return Bot.from_dict(self._call("create_bot", spec))

    def get_bot(self, bot: BotRef) -> Bot:
        """Reads a Bot."""
        return Bot.from_dict(self._call("get_bot", _bot_id(bot)))

    def list_bots(self) -> list[Bot]:
        """The Bots, oldest first."""
        return [Bot.from_dict(b) for b in self._call("list_bots")]

    def update_bot(
        self,
        bot: BotRef,
        *,
        revision: int | None = None,
        name: str | None = None,
        instructions: str | None = None,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool | None = None,
    ) -> Bot:
        """Changes a Bot (see :meth:`AsyncClient.update_bot`)."""
        update = _bot_update(revision, name, instructions, model, tools, limits, shared)
        return Bot.from_dict(self._call("update_bot", _bot_id(bot), update))

    def delete_bot(self, bot: BotRef) -> None:
        """Deletes a Bot that has no Chats left."""
        self._call("delete_bot", _bot_id(bot))

    def create_chat(self, bot: BotRef) -> Chat:
        """Creates a Chat with a Bot."""
        return Chat.from_dict(self._call("create_chat", _bot_id(bot)))

    def get_chat(self, chat: ChatRef) -> Chat:
        """Reads a Chat."""
        return Chat.from_dict(self._call("get_chat", _chat_id(chat)))

    def send(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> SendReceipt:
        """Sends input (see :meth:`AsyncClient.send`)."""
        data = _input(input, command_key)
        return SendReceipt.from_dict(self._call("send", _chat_id(chat), data))

    def steer(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> SendReceipt:
        """Sends input that joins the running Turn; with no Turn running it starts one."""
        data = _input(input, command_key)
        return SendReceipt.from_dict(self._call("steer", _chat_id(chat), data))

    def stop(self, chat: ChatRef) -> None:
        """Stops the running Turn; queued input then runs."""
        self._call("stop", _chat_id(chat))

    def delete_chat(self, chat: ChatRef) -> None:
        """Deletes a Chat: closes it to input, cancels its Turns, returns once they ended."""
        self._call("delete_chat", _chat_id(chat))

    def history(self, chat: ChatRef) -> list[ChatEntry]:
        """The Chat's messages, oldest first."""
        return [ChatEntry.from_dict(e) for e in self._call("history", _chat_id(chat))]

    def get_execution(self, execution: ExecutionRef) -> Execution:
        """Reads an execution."""
        return Execution.from_dict(self._call("get_execution", _execution_id(execution)))

    def observe(self, execution: ExecutionRef, after: int = 0) -> EventStream:
        """The execution's events after sequence ``after``, ending after its last event."""
        return EventStream(self._native.observe_sync(_execution_id(execution), _after(after)))

    def wait(self, execution: ExecutionRef) -> Execution:
        """Waits until the execution has ended (reading its events) and returns it."""
        for _ in self.observe(execution):
            pass
        return self.get_execution(execution)

    def cancel_execution(self, execution: ExecutionRef) -> Execution:
        """Asks an execution to stop; returns its state (``cancelling`` or an end state)."""
        return Execution.from_dict(self._call("cancel_execution", _execution_id(execution)))

    def deliver_tool_result(self, execution: ExecutionRef, result: ToolResult | Mapping[str, Any]) -> None:
        """Delivers the result of a tool call the execution waits for."""
        self._call("deliver_tool_result", _execution_id(execution), _tool_result(result))

    def list_approvals(self, state: ApprovalState | None = None) -> list[ApprovalRequest]:
        """The approval requests you may decide (see :meth:`AsyncClient.list_approvals`)."""
        wanted = _state(state)
        return [ApprovalRequest.from_dict(r) for r in self._call("list_approvals", wanted)]

    def decide_approval(
        self, request: ApprovalRef, decision: Decision, reason: str | None = None
    ) -> ApprovalRequest:
        """Decides a pending approval request (see :meth:`AsyncClient.decide_approval`)."""
        id, data = _request_id(request), _decision(decision, reason)
        return ApprovalRequest.from_dict(self._call("decide_approval", id, data))

    def list_unknown_outcomes(
        self, limit: int | None = None, cursor: str | None = None
    ) -> UnknownOutcomePage:
        """Your executions waiting for a decision on an unknown outcome (see
        :meth:`AsyncClient.list_unknown_outcomes`)."""
        wanted = _page(limit, cursor)
        return UnknownOutcomePage.from_dict(self._call("list_unknown_outcomes", *wanted))

    def decide_outcome(
        self,
        execution: ExecutionRef,
        call: str,
        decision: OutcomeDecision,
        result: str | None = None,
        reason: str | None = None,
    ) -> OutcomeDecisionRecord:
        """Decides the call an execution waits for in ``outcome_unknown`` (see
        :meth:`AsyncClient.decide_outcome`)."""
        id, data = _execution_id(execution), _outcome(call, decision, result, reason)
        return OutcomeDecisionRecord.from_dict(self._call("decide_outcome", id, data))

    def pause_execution(self, execution: ExecutionRef) -> Execution:
        """Pauses an execution (see :meth:`AsyncClient.pause_execution`)."""
        return Execution.from_dict(self._call("pause_execution", _execution_id(execution)))

    def resume_execution(self, execution: ExecutionRef) -> Execution:
        """Resumes a paused execution (see :meth:`AsyncClient.resume_execution`)."""
        return Execution.from_dict(self._call("resume_execution", _execution_id(execution)))

    def plan_mode(self, chat: ChatRef) -> bool:
        """Whether a Chat is in plan mode (see :meth:`AsyncClient.plan_mode`)."""
        return _enabled(self._call("plan_mode", _chat_id(chat)))

    def set_plan_mode(self, chat: ChatRef, enabled: bool) -> bool:
        """Turns a Chat's plan mode on or off (see :meth:`AsyncClient.set_plan_mode`)."""
        _check("enabled", enabled, bool, "a bool")
        return _enabled(self._call("set_plan_mode", _chat_id(chat), enabled))

    def close(self) -> None:
        """Closes the client: later calls raise :class:`ClosedError`."""
        self._native.close_sync()


async def connect(
    uri: str,
    *,
    token: str | None = None,
    tools: Mapping[str, ToolFunction] | None = None,
) -> AsyncClient:
    """Connects to OpenBot: ``memory://`` runs everything in this process, ``http://host:port``
    (with ``token``) talks to a server. ``tools`` maps tool names to Python functions (sync or
    async); async ones run on the event loop this is awaited in."""
    _uri(uri, token)
    wrapped = native_tools(tools, sync=False)
    native = await _bridge.call(
        lambda bridge, ticket: _native.connect_async(bridge, ticket, uri, token, wrapped)
    )
    return AsyncClient(native, uri)


def connect_sync(
    uri: str,
    *,
    token: str | None = None,
    tools: Mapping[str, ToolFunction] | None = None,
) -> Client:
    """Connects like :func:`connect` and returns the blocking :class:`Client`. Async tool
    functions run with ``asyncio.run`` on the tool's worker thread."""
    _uri(uri, token)
    return Client(_native.connect_sync(uri, token, native_tools(tools, sync=True)), uri)
