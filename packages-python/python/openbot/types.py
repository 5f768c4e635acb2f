"""The data of OpenBot as Python classes: Bots, Chats, executions, events, tool results.

Each class reads the schema's JSON form (``from_dict``) and keeps it as ``raw``; the fields are
the schema's fields. Timestamps are :class:`datetime.datetime` in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, TypeAlias, Union

__all__ = [
    "Limits",
    "ToolDefinition",
    "ToolCall",
    "ToolResult",
    "Usage",
    "Bot",
    "Chat",
    "SendReceipt",
    "ChatEntry",
    "Execution",
    "Event",
    "ApprovalRequest",
    "ApprovalState",
    "Decision",
    "UnknownOutcome",
    "UnknownOutcomePage",
    "OutcomeDecision",
    "OutcomeDecisionRecord",
    "TERMINAL_STATES",
    "TERMINAL_EVENT_TYPES",
    "EVENT_TYPES",
]

#: The states after which an execution never changes.
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "interrupted"})

#: The ``type`` of every event.
EVENT_TYPES = (
    "turn_started",
    "input_steered",
    "model_step_started",
    "text_delta",
    "tool_call",
    "tool_result",
    "call_outcome_unknown",
    "child_started",
    "approval_requested",
    "job_ended",
    "turn_ended",
    "failed",
)

#: The types of the events after which an execution has no more.
TERMINAL_EVENT_TYPES = frozenset({"turn_ended", "job_ended", "failed"})

# The Literal aliases below are unions of one-value Literals: the type checker reads a Literal
# of several values as such a union, and stubtest then finds the same union at run time.

#: Where an approval request is: waiting for a decision (``pending``), decided (``approved``,
#: ``denied``), or over without one (``expired``, ``revoked``: the rights it was asked with
#: are gone, ``cancelled``: the work that asked was cancelled).
ApprovalState: TypeAlias = Union[
    Literal["pending"],
    Literal["approved"],
    Literal["denied"],
    Literal["expired"],
    Literal["revoked"],
    Literal["cancelled"],
]

#: A person's decision on an approval request.
Decision: TypeAlias = Union[Literal["approve"], Literal["deny"]]

#: What a person found out about a call whose outcome is unknown: it was ``applied`` (with a
#: result), ``not_applied`` (send it again), or ``give_up`` (end the execution).
OutcomeDecision: TypeAlias = Union[Literal["applied"], Literal["not_applied"], Literal["give_up"]]

_FRACTION = re.compile(r"\.(\d+)")


def _time(text: str) -> datetime:
    """An RFC 3339 time as an aware datetime (fractions past microseconds are cut)."""
    text = text.replace("Z", "+00:00")
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    return datetime.fromisoformat(text).astimezone(timezone.utc)


def _text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


@dataclass(frozen=True)
class Limits:
    """Limits on one Turn; a limit that is reached ends the Turn with a matching outcome."""

    max_steps: int | None = None
    max_wall_time_ms: int | None = None
    max_cost_micros: int | None = None
    #: How many times the same tool call (name and arguments) may run in a Turn; asking once
    #: more ends the Turn with the outcome ``repeated_tool_call``.
    max_repeated_calls: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limits:
        return cls(
            max_steps=data.get("max_steps"),
            max_wall_time_ms=data.get("max_wall_time_ms"),
            max_cost_micros=data.get("max_cost_micros"),
            max_repeated_calls=data.get("max_repeated_calls"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class ToolDefinition:
    """A tool a model may call: its name, what it does, and the JSON Schema of its input."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolDefinition:
        return cls(
            name=data["name"],
            description=data.get("description", ""),
            input_schema=dict(data.get("input_schema", {"type": "object"})),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True)
class ToolCall:
    """One tool call asked for by the model."""

    id: str
    name: str
    arguments: Any

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments"))


@dataclass(frozen=True)
class ToolResult:
    """The result of one tool call, as given back to the model."""

    call_id: str
    name: str
    output: list[dict[str, Any]]
    is_error: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolResult:
        return cls(
            call_id=data["call_id"],
            name=data["name"],
            output=list(data.get("output", [])),
            is_error=bool(data.get("is_error", False)),
        )

    @classmethod
    def for_call(cls, call: ToolCall, text: str, *, is_error: bool = False) -> ToolResult:
        """A result of one text part answering ``call``."""
        return cls(
            call_id=call.id,
            name=call.name,
            output=[{"type": "text", "text": text}],
            is_error=is_error,
        )

    @property
    def text(self) -> str:
        """The text parts of the output, joined."""
        return _text(self.output)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "output": self.output,
            "is_error": self.is_error,
        }


@dataclass(frozen=True)
class Usage:
    """Tokens used and, when the price is known, their cost in millionths of a US dollar."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_micros: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            input_tokens=data.get("input_tokens", 0),
            output_tokens=data.get("output_tokens", 0),
            cached_input_tokens=data.get("cached_input_tokens", 0),
            cost_micros=data.get("cost_micros"),
        )


@dataclass(frozen=True)
class Bot:
    """A Bot: instructions, a model, tools and limits."""

    id: str
    name: str
    instructions: str
    model: str
    tools: list[ToolDefinition]
    limits: Limits
    shared: bool
    revision: int
    created_at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bot:
        spec = data["spec"]
        return cls(
            id=data["id"],
            name=spec["name"],
            instructions=spec.get("instructions", ""),
            model=spec["model"],
            tools=[ToolDefinition.from_dict(t) for t in spec.get("tools", [])],
            limits=Limits.from_dict(spec.get("limits", {})),
            shared=bool(spec.get("shared", False)),
            revision=data["revision"],
            created_at=_time(data["created_at"]),
        )


@dataclass(frozen=True)
class Chat:
    """A conversation with a Bot."""

    id: str
    bot_id: str
    created_at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chat:
        return cls(id=data["id"], bot_id=data["bot_id"], created_at=_time(data["created_at"]))


@dataclass(frozen=True)
class SendReceipt:
    """What happened to sent input: ``disposition`` is ``started``, ``queued`` or
    ``steered``; ``execution_id`` names the Turn that takes it."""

    chat_id: str
    execution_id: str
    disposition: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SendReceipt:
        return cls(
            chat_id=data["chat_id"],
            execution_id=data["execution_id"],
            disposition=data["disposition"],
        )


@dataclass(frozen=True)
class ChatEntry:
    """One message of a Chat's history. ``role`` is ``user``, ``assistant`` or ``tool``;
    ``message`` is the message as the schema has it."""

    role: str
    text: str
    message: dict[str, Any]
    execution_id: str
    at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatEntry:
        message = dict(data["message"])
        role = message.get("role", "")
        content = message["result"].get("output") if role == "tool" else message.get("content")
        return cls(
            role=role,
            text=_text(content),
            message=message,
            execution_id=data["execution_id"],
            at=_time(data["at"]),
        )


@dataclass(frozen=True)
class Execution:
    """Stored work with a stable ID and a state: ``queued``, ``running``, ``waiting``,
    ``cancelling``, ``outcome_unknown``, or an end state (``completed``, ``failed``,
    ``cancelled``, ``interrupted``). ``kind`` is ``turn`` (a Turn of a Chat, or one delegated
    to another Bot) or ``tool_job`` (one tool call run on its own: a background tool, or a call
    that waited for approval)."""

    id: str
    kind: str
    state: str
    chat_id: str | None
    outcome: str | None
    usage: Usage
    last_sequence: int
    created_at: datetime
    updated_at: datetime
    #: Why it was interrupted, when ``state`` is ``interrupted``.
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Execution:
        return cls(
            id=data["id"],
            kind=data["kind"],
            state=data["state"],
            chat_id=data.get("chat_id"),
            outcome=data.get("outcome"),
            usage=Usage.from_dict(data.get("usage", {})),
            last_sequence=data["last_sequence"],
            created_at=_time(data["created_at"]),
            updated_at=_time(data["updated_at"]),
            reason=data.get("reason"),
        )

    @property
    def is_terminal(self) -> bool:
        """Whether the execution has ended."""
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class ApprovalRequest:
    """A tool call that waits for (or got) a person's decision. ``source_execution_id`` is the
    Turn whose model asked for the call, ``execution_id`` the child execution (a ``tool_job``)
    that runs it once it is approved; ``chat_id`` the Chat its notices go to."""

    id: str
    source_execution_id: str
    execution_id: str
    chat_id: str | None
    bot_id: str
    call: ToolCall
    state: str
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        decided_at = data.get("decided_at")
        return cls(
            id=data["id"],
            source_execution_id=data["source_execution_id"],
            execution_id=data["execution_id"],
            chat_id=data.get("chat_id"),
            bot_id=data["bot_id"],
            call=ToolCall.from_dict(data["call"]),
            state=data["state"],
            created_at=_time(data["created_at"]),
            expires_at=_time(data["expires_at"]),
            decided_at=_time(decided_at) if isinstance(decided_at, str) else None,
            decided_by=data.get("decided_by"),
            reason=data.get("reason"),
        )

    @property
    def is_pending(self) -> bool:
        """Whether it still waits for a decision."""
        return self.state == "pending"


@dataclass(frozen=True)
class UnknownOutcome:
    """A call whose outcome is unknown (a write without a safe retry rule lost its answer) and
    the execution that waits in ``outcome_unknown`` for a decision on it. ``call`` is the call's
    key (e.g. ``1/tool:0/1``) a decision names; ``tool_call`` what was sent (tool name and
    arguments), to check in the outside system, with ``idempotency_key``, the
    ``Idempotency-Key`` it was sent with."""

    execution_id: str
    kind: str
    chat_id: str | None
    call: str
    step: int
    attempt: int
    tool_call: ToolCall
    idempotency_key: str
    waiting_since: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnknownOutcome:
        return cls(
            execution_id=data["execution_id"],
            kind=data["kind"],
            chat_id=data.get("chat_id"),
            call=data["call"],
            step=data["step"],
            attempt=data["attempt"],
            tool_call=ToolCall.from_dict(data["tool_call"]),
            idempotency_key=data["idempotency_key"],
            waiting_since=_time(data["waiting_since"]),
        )


@dataclass(frozen=True)
class UnknownOutcomePage:
    """One page of unknown outcomes, oldest first; ``next_cursor`` (``None`` on the last page)
    starts the next one."""

    items: list[UnknownOutcome]
    next_cursor: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnknownOutcomePage:
        return cls(
            items=[UnknownOutcome.from_dict(o) for o in data.get("items", [])],
            next_cursor=data.get("next_cursor"),
        )


@dataclass(frozen=True)
class OutcomeDecisionRecord:
    """A recorded decision on an unknown outcome, its audit entry: who decided (the member
    ``decided_by`` and the ``token_id`` they used), which ``call``, what and when."""

    id: str
    execution_id: str
    call: str
    decision: str
    reason: str | None
    decided_by: str
    token_id: str | None
    decided_at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutcomeDecisionRecord:
        return cls(
            id=data["id"],
            execution_id=data["execution_id"],
            call=data["call"],
            decision=data["decision"],
            reason=data.get("reason"),
            decided_by=data["decided_by"],
            token_id=data.get("token_id"),
            decided_at=_time(data["decided_at"]),
        )


class Event:
    """One event of an execution, in order: ``sequence`` starts at 1 with no gaps, so a reader
    that saw ``n`` resumes with ``observe(execution, after=n)``.

    ``type`` is one of ``turn_started``, ``input_steered``, ``model_step_started``,
    ``text_delta``, ``tool_call``, ``tool_result``, ``call_outcome_unknown``,
    ``child_started``, ``approval_requested``, ``job_ended``, ``turn_ended``, ``failed``;
    ``data`` holds the event's other fields, e.g. ``data["text"]`` of a ``text_delta``. The
    properties read the common ones.
    """

    __slots__ = ("execution_id", "sequence", "type", "data", "_at")

    execution_id: str
    sequence: int
    type: str
    data: dict[str, Any]

    def __init__(
        self, execution_id: str, sequence: int, type: str, at: str, data: dict[str, Any]
    ) -> None:
        self.execution_id = execution_id
        self.sequence = sequence
        self.type = type
        self._at = at
        self.data = data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        rest = dict(data)
        return cls(
            rest.pop("execution_id"),
            rest.pop("sequence"),
            rest.pop("type"),
            rest.pop("at"),
            rest,
        )

    @property
    def at(self) -> datetime:
        """When the event was recorded."""
        return _time(self._at)

    @property
    def is_terminal(self) -> bool:
        """Whether this is the last event of its execution (``turn_ended``, ``job_ended`` or
        ``failed``)."""
        return self.type in TERMINAL_EVENT_TYPES

    @property
    def text(self) -> str | None:
        """The new text of a ``text_delta``."""
        value = self.data.get("text")
        return value if isinstance(value, str) else None

    @property
    def outcome(self) -> str | None:
        """The outcome of a ``turn_ended``: ``completed``, ``max_steps``,
        ``repeated_tool_call``, ``cancelled``, ..."""
        value = self.data.get("outcome")
        return value if isinstance(value, str) else None

    @property
    def step(self) -> int | None:
        """The model step of a step, text, tool call or tool result event."""
        value = self.data.get("step")
        return value if isinstance(value, int) else None

    @property
    def attempt(self) -> int | None:
        """The attempt within the step of a ``model_step_started`` or ``text_delta``."""
        value = self.data.get("attempt")
        return value if isinstance(value, int) else None

    @property
    def usage(self) -> Usage | None:
        """What the whole Turn used, on ``turn_ended``."""
        value = self.data.get("usage")
        return Usage.from_dict(value) if isinstance(value, dict) else None

    @property
    def category(self) -> str | None:
        """The safe category of a ``failed`` event (``model_provider``, ``tool``, ...)."""
        value = self.data.get("category")
        return value if isinstance(value, str) else None

    @property
    def error_id(self) -> str | None:
        """The ID of the sealed failure record of a ``failed`` event."""
        value = self.data.get("error_id")
        return value if isinstance(value, str) else None

    @property
    def tool_call(self) -> ToolCall | None:
        """The call of a ``tool_call`` event."""
        if self.type != "tool_call":
            return None
        return ToolCall.from_dict(self.data["call"])

    @property
    def tool_result(self) -> ToolResult | None:
        """The result of a ``tool_result`` event."""
        if self.type != "tool_result":
            return None
        return ToolResult.from_dict(self.data["result"])

    @property
    def child_id(self) -> str | None:
        """The child execution a ``child_started`` event names (its ``kind`` is in
        ``data["kind"]``: ``tool_job`` or ``turn``)."""
        value = self.data.get("child_id") if self.type == "child_started" else None
        return value if isinstance(value, str) else None

    @property
    def request_id(self) -> str | None:
        """The approval request of an ``approval_requested`` event."""
        value = self.data.get("request_id") if self.type == "approval_requested" else None
        return value if isinstance(value, str) else None

    @property
    def requested_call(self) -> ToolCall | None:
        """The call an ``approval_requested`` event asks a decision for."""
        if self.type != "approval_requested":
            return None
        return ToolCall.from_dict(self.data["call"])

    @property
    def state(self) -> str | None:
        """The end state of a ``job_ended`` event: ``completed`` or ``cancelled``."""
        value = self.data.get("state") if self.type == "job_ended" else None
        return value if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"Event(sequence={self.sequence}, type={self.type!r}, data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.execution_id, self.sequence) == (other.execution_id, other.sequence)

    def __hash__(self) -> int:
        return hash((self.execution_id, self.sequence))
