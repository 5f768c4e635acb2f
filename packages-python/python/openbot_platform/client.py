"""The Client, in two forms with the same methods: :class:`AsyncClient` (asyncio) and
:class:`Client` (blocking; waits with the GIL released, so other Python threads run).

Every operation of the API is a method of both (generated in ``_operations.py`` from
schema/openapi.json); the ones below give some of them a friendlier signature (objects for
IDs, text as input, tool functions) and answer handles: a :class:`BotHandle` is a ``Bot`` with
``create_chat()``, a :class:`ChatHandle` a ``Chat`` with ``send()``, a :class:`Turn` the receipt
of a send with ``events()`` and ``wait()``.

``memory://`` runs everything in this process; ``http://host:port`` talks to a server. The
same code works against both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar, Union

from . import _bridge, _native
from ._args import (
    ApprovalRef,
    BotRef,
    ChatRef,
    ExecutionRef,
    Input,
    ToolSpec,
    _after,
    _bot_id,
    _bot_spec,
    _bot_update,
    _chat_id,
    _check,
    _computer,
    _decision,
    _execution_id,
    _input,
    _outcome,
    _request_id,
    _tool_result,
    _uri,
)
from ._operations import AsyncOperations, SyncOperations
from .tools import ToolFunction, native_tools
from .types import (
    ApprovalRequest,
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
    ToolResult,
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
    "Tools",
    "TurnEnd",
    "AsyncBotHandle",
    "AsyncChatHandle",
    "AsyncTurn",
    "BotHandle",
    "ChatHandle",
    "Turn",
]

#: The tool functions given to ``connect``: a dict of name -> function, or a list of functions
#: (each named after its ``__name__``).
Tools = Union[Mapping[str, ToolFunction], Sequence[ToolFunction]]

H = TypeVar("H")


def _named(tools: Tools | None) -> dict[str, ToolFunction]:
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        return dict(tools)
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise TypeError(f"tools must be a dict or a list of functions, not {type(tools).__name__}")
    named: dict[str, ToolFunction] = {}
    for function in tools:
        name = getattr(function, "__name__", None)
        if not callable(function) or not isinstance(name, str):
            raise TypeError(f"a tool must be a named function, not {type(function).__name__}")
        named[name] = function
    return named


def _handle(cls: type[H], data: Any, client: Any) -> H:
    """``data`` (a generated dataclass) as the handle class ``cls`` (its subclass), bound to
    ``client``."""
    handle = cls(**{f.name: getattr(data, f.name) for f in dataclasses.fields(data)})
    object.__setattr__(handle, "_client", client)
    return handle


class _TurnText:
    """Follows a Turn's events to its answer: the text of its last model step (the last
    attempt of it: a repeated request's text starts afresh)."""

    def __init__(self) -> None:
        self.text = ""

    def read(self, event: Event) -> None:
        if event.type == "model_step_started":
            self.text = ""
        elif event.type == "text_delta":
            self.text += event.text or ""


@dataclass(frozen=True, kw_only=True)
class TurnEnd(Execution):
    """An execution that has ended, with the text of its answer: what ``wait()`` gives."""

    #: The text of the Turn's last model step (its answer); empty for work that is no Turn.
    text: str = ""


def _turn_end(execution: Execution, text: str) -> TurnEnd:
    fields = {f.name: getattr(execution, f.name) for f in dataclasses.fields(execution)}
    return TurnEnd(**fields, text=text)


class AsyncEventStream:
    """The events of one execution, as an async iterator that ends after the execution's last
    event: ``async for event in client.observe(turn)``. The stream opens at the first read (or
    when awaited: ``await client.observe(turn)`` gives the open stream, as before).
    ``aclose()`` (or leaving ``async with``) stops reading; it cancels nothing."""

    def __init__(self, client: _native.NativeClient, execution_id: str, after: int) -> None:
        self._client = client
        self._execution_id = execution_id
        self._after = after
        self._native: _native.NativeEvents | None = None
        self._closed = False
        self._buffer: list[Event] = []
        self._index = 0

    async def _open(self) -> _native.NativeEvents:
        if self._native is None:
            client, id, after = self._client, self._execution_id, self._after
            self._native = await _bridge.call(
                lambda bridge, ticket: client.observe_async(bridge, ticket, id, after)
            )
        return self._native

    async def _opened(self) -> AsyncEventStream:
        await self._open()
        return self

    def __await__(self) -> Generator[Any, None, AsyncEventStream]:
        return self._opened().__await__()

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        if self._index >= len(self._buffer):
            if self._closed:
                raise StopAsyncIteration
            native = await self._open()
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
        self._closed = True
        if self._native is not None:
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


class AsyncClient(AsyncOperations):
    """The asyncio Client. Make one with :func:`openbot_platform.connect`."""

    def __init__(
        self, native: _native.NativeClient, uri: str, tools: Mapping[str, ToolFunction] | None = None
    ) -> None:
        self._native = native
        self._tools: dict[str, ToolFunction] = dict(tools or {})
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
        tools: Tools | None = None,
        outbound: str | None = None,
        computer: Mapping[str, Any] | None = None,
    ) -> AsyncClient:
        """The same as :func:`openbot_platform.connect`."""
        return await connect(uri, token=token, tools=tools, outbound=outbound, computer=computer)

    async def create_bot(
        self,
        *,
        name: str,
        model: str,
        instructions: str = "",
        tools: Sequence[ToolSpec] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool = False,
    ) -> AsyncBotHandle:
        """Creates a Bot. ``model`` is ``provider:model`` (``openai:gpt-4o-mini``,
        ``scripted:/abs/path.json``, ...); ``tools`` lists what the model may call: names of
        the functions given to ``connect``, functions, or definitions. Left out, the Bot gets
        every function given to ``connect``."""
        spec = _bot_spec(name, model, instructions, tools, limits, shared, self._tools)
        return _handle(AsyncBotHandle, await self._create_bot(**spec), self)

    async def get_bot(self, bot: BotRef) -> AsyncBotHandle:
        """Reads a Bot."""
        return _handle(AsyncBotHandle, await self._get_bot(_bot_id(bot)), self)

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
    ) -> AsyncBotHandle:
        """Changes a Bot; fields left ``None`` stay. With ``revision`` set, fails with
        :class:`ConflictError` if the Bot changed since that revision."""
        update = _bot_update(revision, name, instructions, model, tools, limits, shared, self._tools)
        return _handle(AsyncBotHandle, await self._update_bot(_bot_id(bot), **update), self)

    async def create_chat(self, bot: BotRef) -> AsyncChatHandle:
        """Creates a Chat with a Bot."""
        return _handle(AsyncChatHandle, await self._create_chat(bot_id=_bot_id(bot)), self)

    async def get_chat(self, chat: ChatRef) -> AsyncChatHandle:
        """Reads a Chat."""
        return _handle(AsyncChatHandle, await self._get_chat(_chat_id(chat)), self)

    async def send(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> AsyncTurn:
        """Sends input: it starts a Turn, or waits in order for its own Turn while one runs.
        A retry with the same ``command_key`` and input returns the same receipt."""
        receipt = await self._send(_chat_id(chat), **_input(input, command_key))
        return _handle(AsyncTurn, receipt, self)

    async def steer(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> AsyncTurn:
        """Sends input that joins the running Turn; with no Turn running it starts one."""
        receipt = await self._steer(_chat_id(chat), **_input(input, command_key))
        return _handle(AsyncTurn, receipt, self)

    def observe(self, execution: ExecutionRef, after: int = 0) -> AsyncEventStream:
        """The execution's events after sequence ``after``, ending after its last event:
        ``async for event in client.observe(turn)``."""
        return AsyncEventStream(self._native, _execution_id(execution), _after(after))

    async def wait(self, execution: ExecutionRef) -> TurnEnd:
        """Waits until the execution has ended (reading its events) and returns it with the
        text of its answer."""
        text = _TurnText()
        async for event in self.observe(execution):
            text.read(event)
        return _turn_end(await self.get_execution(_execution_id(execution)), text.text)

    async def deliver_tool_result(
        self, execution: ExecutionRef, result: ToolResult | Mapping[str, Any]
    ) -> None:
        """Delivers the result of a tool call the execution waits for (a Bot tool with no
        function given to ``connect``)."""
        await self._deliver_tool_result(_execution_id(execution), **_tool_result(result))

    async def decide_approval(
        self, request: ApprovalRef, decision: Decision, reason: str | None = None
    ) -> ApprovalRequest:
        """Decides a pending approval request and returns it as decided. ``"approve"`` runs
        the call once, in its child execution, whose result reaches the Chat as a notice;
        ``"deny"`` never runs it, and the model is told (with ``reason``). A request that is
        no longer pending raises :class:`ConflictError`, an unknown one (always, in memory)
        :class:`NotFoundError`."""
        return await self._decide_approval(_request_id(request), **_decision(decision, reason))

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
        fields = _outcome(call, decision, result, reason)
        return await self._decide_outcome(_execution_id(execution), **fields)

    async def plan_mode(self, chat: ChatRef) -> bool:
        """Whether a Chat is in plan mode (always ``False`` in memory)."""
        return (await self._plan_mode(_chat_id(chat))).enabled

    async def set_plan_mode(self, chat: ChatRef, enabled: bool) -> bool:
        """Turns a Chat's plan mode on or off; returns the mode now in force. In plan mode
        the Bot may only call the built-in ``propose_plan`` tool; approving its plan turns
        plan mode off. Only a server has plan mode: turning it on in memory raises
        :class:`InvalidInputError`."""
        _check("enabled", enabled, bool, "a bool")
        return (await self._set_plan_mode(_chat_id(chat), enabled=enabled)).enabled

    async def close(self) -> None:
        """Closes the client: later calls raise :class:`ClosedError`; in memory mode running
        Turns are cancelled."""
        native = self._native
        await _bridge.call(lambda bridge, ticket: native.close_async(bridge, ticket))


class Client(SyncOperations):
    """The blocking Client. Make one with :func:`openbot_platform.connect_sync`. Every call
    waits with the GIL released; Ctrl-C (KeyboardInterrupt) interrupts a wait."""

    def __init__(
        self, native: _native.NativeClient, uri: str, tools: Mapping[str, ToolFunction] | None = None
    ) -> None:
        self._native = native
        self._tools: dict[str, ToolFunction] = dict(tools or {})
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
        tools: Tools | None = None,
        outbound: str | None = None,
        computer: Mapping[str, Any] | None = None,
    ) -> Client:
        """The same as :func:`openbot_platform.connect_sync`."""
        return connect_sync(uri, token=token, tools=tools, outbound=outbound, computer=computer)

    def create_bot(
        self,
        *,
        name: str,
        model: str,
        instructions: str = "",
        tools: Sequence[ToolSpec] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool = False,
    ) -> BotHandle:
        """Creates a Bot. ``model`` is ``provider:model`` (``openai:gpt-4o-mini``,
        ``scripted:/abs/path.json``, ...); ``tools`` lists what the model may call: names of
        the functions given to ``connect``, functions, or definitions. Left out, the Bot gets
        every function given to ``connect``."""
        spec = _bot_spec(name, model, instructions, tools, limits, shared, self._tools)
        return _handle(BotHandle, self._create_bot(**spec), self)

    def get_bot(self, bot: BotRef) -> BotHandle:
        """Reads a Bot."""
        return _handle(BotHandle, self._get_bot(_bot_id(bot)), self)

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
    ) -> BotHandle:
        """Changes a Bot; fields left ``None`` stay. With ``revision`` set, fails with
        :class:`ConflictError` if the Bot changed since that revision."""
        update = _bot_update(revision, name, instructions, model, tools, limits, shared, self._tools)
        return _handle(BotHandle, self._update_bot(_bot_id(bot), **update), self)

    def create_chat(self, bot: BotRef) -> ChatHandle:
        """Creates a Chat with a Bot."""
        return _handle(ChatHandle, self._create_chat(bot_id=_bot_id(bot)), self)

    def get_chat(self, chat: ChatRef) -> ChatHandle:
        """Reads a Chat."""
        return _handle(ChatHandle, self._get_chat(_chat_id(chat)), self)

    def send(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> Turn:
        """Sends input: it starts a Turn, or waits in order for its own Turn while one runs.
        A retry with the same ``command_key`` and input returns the same receipt."""
        receipt = self._send(_chat_id(chat), **_input(input, command_key))
        return _handle(Turn, receipt, self)

    def steer(self, chat: ChatRef, input: Input, *, command_key: str | None = None) -> Turn:
        """Sends input that joins the running Turn; with no Turn running it starts one."""
        receipt = self._steer(_chat_id(chat), **_input(input, command_key))
        return _handle(Turn, receipt, self)

    def observe(self, execution: ExecutionRef, after: int = 0) -> EventStream:
        """The execution's events after sequence ``after``, ending after its last event."""
        return EventStream(self._native.observe_sync(_execution_id(execution), _after(after)))

    def wait(self, execution: ExecutionRef) -> TurnEnd:
        """Waits until the execution has ended (reading its events) and returns it with the
        text of its answer."""
        text = _TurnText()
        for event in self.observe(execution):
            text.read(event)
        return _turn_end(self.get_execution(_execution_id(execution)), text.text)

    def deliver_tool_result(
        self, execution: ExecutionRef, result: ToolResult | Mapping[str, Any]
    ) -> None:
        """Delivers the result of a tool call the execution waits for (a Bot tool with no
        function given to ``connect``)."""
        self._deliver_tool_result(_execution_id(execution), **_tool_result(result))

    def decide_approval(
        self, request: ApprovalRef, decision: Decision, reason: str | None = None
    ) -> ApprovalRequest:
        """Decides a pending approval request and returns it as decided. ``"approve"`` runs
        the call once, in its child execution, whose result reaches the Chat as a notice;
        ``"deny"`` never runs it, and the model is told (with ``reason``). A request that is
        no longer pending raises :class:`ConflictError`, an unknown one (always, in memory)
        :class:`NotFoundError`."""
        return self._decide_approval(_request_id(request), **_decision(decision, reason))

    def decide_outcome(
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
        fields = _outcome(call, decision, result, reason)
        return self._decide_outcome(_execution_id(execution), **fields)

    def plan_mode(self, chat: ChatRef) -> bool:
        """Whether a Chat is in plan mode (always ``False`` in memory)."""
        return self._plan_mode(_chat_id(chat)).enabled

    def set_plan_mode(self, chat: ChatRef, enabled: bool) -> bool:
        """Turns a Chat's plan mode on or off; returns the mode now in force. In plan mode
        the Bot may only call the built-in ``propose_plan`` tool; approving its plan turns
        plan mode off. Only a server has plan mode: turning it on in memory raises
        :class:`InvalidInputError`."""
        _check("enabled", enabled, bool, "a bool")
        return self._set_plan_mode(_chat_id(chat), enabled=enabled).enabled

    def close(self) -> None:
        """Closes the client: later calls raise :class:`ClosedError`; in memory mode running
        Turns are cancelled."""
        self._native.close_sync()


class AsyncBotHandle(Bot):
    """A Bot (all its fields) read by the async client, with what can be done to it."""

    _client: AsyncClient

    async def create_chat(self) -> AsyncChatHandle:
        """Starts a Chat with this Bot."""
        return await self._client.create_chat(self.id)

    async def update(
        self,
        *,
        revision: int | None = None,
        name: str | None = None,
        instructions: str | None = None,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool | None = None,
    ) -> AsyncBotHandle:
        """Changes the Bot (see :meth:`AsyncClient.update_bot`); gives it as it is now."""
        return await self._client.update_bot(
            self.id, revision=revision, name=name, instructions=instructions, model=model,
            tools=tools, limits=limits, shared=shared,
        )

    async def delete(self) -> None:
        """Deletes the Bot; it must have no Chats left."""
        await self._client.delete_bot(self.id)


class AsyncChatHandle(Chat):
    """A Chat (all its fields) read by the async client, with what can be done in it."""

    _client: AsyncClient

    async def send(self, input: Input, *, command_key: str | None = None) -> AsyncTurn:
        """Sends input: starts a Turn, or waits in order for a Turn of its own."""
        return await self._client.send(self.id, input, command_key=command_key)

    async def steer(self, input: Input, *, command_key: str | None = None) -> AsyncTurn:
        """Sends input that joins the running Turn (the model sees it at its next step)."""
        return await self._client.steer(self.id, input, command_key=command_key)

    async def stop(self) -> None:
        """Stops the running Turn; queued input then runs."""
        await self._client.stop(self.id)

    async def history(self) -> list[ChatEntry]:
        """The Chat's messages, oldest first."""
        # A list, or once paged every page of it: both read as a list.
        return list(await self._client.history(self.id))

    async def plan_mode(self) -> bool:
        """Whether the Chat is in plan mode."""
        return await self._client.plan_mode(self.id)

    async def set_plan_mode(self, enabled: bool) -> bool:
        """Turns plan mode on or off; returns the mode now in force."""
        return await self._client.set_plan_mode(self.id, enabled)

    async def delete(self) -> None:
        """Deletes the Chat: closes it to input, cancels its Turns, returns once they ended."""
        await self._client.delete_chat(self.id)


class AsyncTurn(SendReceipt):
    """The Turn that takes a sent input (the receipt's fields, and ``id``: its execution),
    with what can be done to it."""

    _client: AsyncClient

    @property
    def id(self) -> str:
        """The ID of the Turn's execution."""
        return self.execution_id

    def events(self, after: int = 0) -> AsyncEventStream:
        """Its events after sequence ``after``: ``async for event in turn.events()``."""
        return self._client.observe(self.execution_id, after)

    async def wait(self) -> TurnEnd:
        """Waits for the Turn's end; gives its execution and the text of its answer."""
        return await self._client.wait(self.execution_id)

    async def get(self) -> Execution:
        """Reads the execution: its state, outcome, usage."""
        return await self._client.get_execution(self.execution_id)

    async def cancel(self) -> Execution:
        """Asks it to stop; gives its state (``cancelling``, or an end state)."""
        return await self._client.cancel_execution(self.execution_id)

    async def pause(self) -> Execution:
        """Pauses it (a server only)."""
        return await self._client.pause_execution(self.execution_id)

    async def resume(self) -> Execution:
        """Resumes it after a pause (a server only)."""
        return await self._client.resume_execution(self.execution_id)

    async def deliver_tool_result(self, result: ToolResult | Mapping[str, Any]) -> None:
        """Delivers the result of a tool call it waits for (a tool no function serves)."""
        await self._client.deliver_tool_result(self.execution_id, result)


class BotHandle(Bot):
    """A Bot (all its fields) read by the blocking client, with what can be done to it."""

    _client: Client

    def create_chat(self) -> ChatHandle:
        """Starts a Chat with this Bot."""
        return self._client.create_chat(self.id)

    def update(
        self,
        *,
        revision: int | None = None,
        name: str | None = None,
        instructions: str | None = None,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        shared: bool | None = None,
    ) -> BotHandle:
        """Changes the Bot (see :meth:`Client.update_bot`); gives it as it is now."""
        return self._client.update_bot(
            self.id, revision=revision, name=name, instructions=instructions, model=model,
            tools=tools, limits=limits, shared=shared,
        )

    def delete(self) -> None:
        """Deletes the Bot; it must have no Chats left."""
        self._client.delete_bot(self.id)


class ChatHandle(Chat):
    """A Chat (all its fields) read by the blocking client, with what can be done in it."""

    _client: Client

    def send(self, input: Input, *, command_key: str | None = None) -> Turn:
        """Sends input: starts a Turn, or waits in order for a Turn of its own."""
        return self._client.send(self.id, input, command_key=command_key)

    def steer(self, input: Input, *, command_key: str | None = None) -> Turn:
        """Sends input that joins the running Turn (the model sees it at its next step)."""
        return self._client.steer(self.id, input, command_key=command_key)

    def stop(self) -> None:
        """Stops the running Turn; queued input then runs."""
        self._client.stop(self.id)

    def history(self) -> list[ChatEntry]:
        """The Chat's messages, oldest first."""
        # A list, or once paged every page of it: both read as a list.
        return list(self._client.history(self.id))

    def plan_mode(self) -> bool:
        """Whether the Chat is in plan mode."""
        return self._client.plan_mode(self.id)

    def set_plan_mode(self, enabled: bool) -> bool:
        """Turns plan mode on or off; returns the mode now in force."""
        return self._client.set_plan_mode(self.id, enabled)

    def delete(self) -> None:
        """Deletes the Chat: closes it to input, cancels its Turns, returns once they ended."""
        self._client.delete_chat(self.id)


class Turn(SendReceipt):
    """The Turn that takes a sent input (the receipt's fields, and ``id``: its execution),
    with what can be done to it."""

    _client: Client

    @property
    def id(self) -> str:
        """The ID of the Turn's execution."""
        return self.execution_id

    def events(self, after: int = 0) -> EventStream:
        """Its events after sequence ``after``: ``for event in turn.events()``."""
        return self._client.observe(self.execution_id, after)

    def wait(self) -> TurnEnd:
        """Waits for the Turn's end; gives its execution and the text of its answer."""
        return self._client.wait(self.execution_id)

    def get(self) -> Execution:
        """Reads the execution: its state, outcome, usage."""
        return self._client.get_execution(self.execution_id)

    def cancel(self) -> Execution:
        """Asks it to stop; gives its state (``cancelling``, or an end state)."""
        return self._client.cancel_execution(self.execution_id)

    def pause(self) -> Execution:
        """Pauses it (a server only)."""
        return self._client.pause_execution(self.execution_id)

    def resume(self) -> Execution:
        """Resumes it after a pause (a server only)."""
        return self._client.resume_execution(self.execution_id)

    def deliver_tool_result(self, result: ToolResult | Mapping[str, Any]) -> None:
        """Delivers the result of a tool call it waits for (a tool no function serves)."""
        self._client.deliver_tool_result(self.execution_id, result)



async def connect(
    uri: str,
    *,
    token: str | None = None,
    tools: Tools | None = None,
    outbound: str | None = None,
    computer: Mapping[str, Any] | None = None,
) -> AsyncClient:
    """Connects to OpenBot: ``memory://`` runs everything in this process, ``http://host:port``
    (with ``token``) talks to a server. ``tools`` are Python functions (sync or async) the
    Bots may call, as a list (named after each function) or a dict of name -> function; async
    ones run on the event loop this is awaited in. A Bot created without ``tools`` gets all
    of them. ``outbound`` is the allow list of internal addresses the Bots' HTTP tools may
    reach in memory mode, written as ``OPENBOT_OUTBOUND_ALLOW`` is (``"loopback,
    10.1.0.0/16"``); a server keeps its own policy. ``computer`` (``{"folders": [...],
    "terminal": True}``) attaches this machine as a Computer in memory mode: a Bot that names
    the :data:`COMPUTER_TOOLS` works in terminals here and on text files inside the folders
    (docs/computers.md); with a server it is an :class:`InvalidInputError`."""
    _uri(uri, token)
    named = _named(tools)
    wrapped = native_tools(named, sync=False)
    attached = _computer(computer)
    native = await _bridge.call(
        lambda bridge, ticket: _native.connect_async(
            bridge, ticket, uri, token, wrapped, outbound, attached
        )
    )
    return AsyncClient(native, uri, named)


def connect_sync(
    uri: str,
    *,
    token: str | None = None,
    tools: Tools | None = None,
    outbound: str | None = None,
    computer: Mapping[str, Any] | None = None,
) -> Client:
    """Connects like :func:`connect` and returns the blocking :class:`Client`. Async tool
    functions run with ``asyncio.run`` on the tool's worker thread."""
    _uri(uri, token)
    named = _named(tools)
    attached = _computer(computer)
    native = _native.connect_sync(
        uri, token, native_tools(named, sync=True), outbound, attached
    )
    return Client(native, uri, named)
