"""What some schema types do beyond their fields, written by hand: the generated dataclasses
of ``types.py`` inherit ``<Type>Extras`` (see scripts/sdkgen/python.py), and read and write their
JSON with the helpers here."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .types import (
        ApprovalState,
        BotSpec,
        ContentPart,
        EventType,
        ExecutionState,
        Limits,
        Message,
        ToolCall,
        ToolDefinition,
        ToolResult,
        Usage,
    )

__all__ = ["TERMINAL_STATES", "TERMINAL_EVENT_TYPES"]

T = TypeVar("T")

#: The states after which an execution never changes (the schema's last four).
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "interrupted"})

#: The types of the events after which an execution has no more.
TERMINAL_EVENT_TYPES = frozenset({"turn_ended", "job_ended", "failed"})

_FRACTION = re.compile(r"\.(\d+)")


def _time(text: str) -> datetime:
    """An RFC 3339 time as an aware datetime in UTC (fractions past microseconds are cut)."""
    try:
        # Python 3.11 reads RFC 3339 itself (`Z`, nanoseconds); the server writes UTC.
        found = datetime.fromisoformat(text)
        if found.tzinfo is timezone.utc:
            return found
        if found.tzinfo is not None:
            return found.astimezone(timezone.utc)
    except ValueError:
        pass
    text = text.replace("Z", "+00:00")
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    return datetime.fromisoformat(text).astimezone(timezone.utc)


def _maybe(value: Any, read: Callable[[Any], T]) -> T | None:
    """``read(value)``, or None for a missing or null value."""
    return None if value is None else read(value)


def _encode(value: Any) -> Any:
    """A value as JSON data: dataclasses by their ``to_dict``, times in RFC 3339."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_dict() if callable(to_dict) else _to_dict(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _to_dict(value: Any) -> dict[str, Any]:
    """A dataclass's JSON form: its fields, those that are None left out."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        if item is not None:
            out[field.name] = _encode(item)
    return out


def _text(parts: Any) -> str:
    """The text parts of content, joined."""
    if not isinstance(parts, list):
        return ""
    return "".join(
        p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


class BotExtras:
    """A Bot's definition read as its own fields: ``bot.name`` is ``bot.spec.name``."""

    if TYPE_CHECKING:
        spec: BotSpec

    @property
    def name(self) -> str:
        """Its display name."""
        return self.spec.name

    @property
    def model(self) -> str:
        """Its model, as ``provider:model``."""
        return self.spec.model

    @property
    def instructions(self) -> str:
        """Its system instructions (empty when none)."""
        return self.spec.instructions or ""

    @property
    def tools(self) -> list[ToolDefinition]:
        """The tools its model may call."""
        return list(self.spec.tools or [])

    @property
    def limits(self) -> Limits:
        """Its limits on each Turn."""
        from .types import Limits

        return self.spec.limits or Limits()

    @property
    def shared(self) -> bool:
        """Whether every member of the organization may use it."""
        return bool(self.spec.shared)


class ChatEntryExtras:
    """A history entry's role and text, read from its message."""

    if TYPE_CHECKING:
        message: Message

    @property
    def role(self) -> str:
        """``user``, ``assistant`` or ``tool``."""
        return str(self.message["role"])

    @property
    def text(self) -> str:
        """The message's text parts, joined (a tool message: its result's)."""
        message: dict[str, Any] = dict(self.message)
        if message.get("role") == "tool":
            return _text(message.get("result", {}).get("output"))
        return _text(message.get("content"))


class ExecutionExtras:

    if TYPE_CHECKING:
        state: ExecutionState
    @property
    def is_terminal(self) -> bool:
        """Whether the execution has ended."""
        return self.state in TERMINAL_STATES


class ToolResultExtras:

    if TYPE_CHECKING:
        output: list[ContentPart]
    @classmethod
    def for_call(cls, call: ToolCall, text: str, *, is_error: bool = False) -> ToolResult:
        """A result of one text part answering ``call``."""
        from .types import ToolResult

        return ToolResult(call_id=call.id, name=call.name, output=[{"type": "text", "text": text}], is_error=is_error)

    @property
    def text(self) -> str:
        """The text parts of the output, joined."""
        return _text(self.output)


class ApprovalRequestExtras:

    if TYPE_CHECKING:
        state: ApprovalState
    @property
    def is_pending(self) -> bool:
        """Whether it still waits for a decision."""
        return self.state == "pending"


class EventExtras:
    """The common fields of the events, read from ``data``."""

    __slots__ = ()

    if TYPE_CHECKING:
        execution_id: str
        sequence: int
        type: EventType
        data: dict[str, Any]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventExtras):
            return NotImplemented
        return (self.execution_id, self.sequence) == (other.execution_id, other.sequence)

    def __hash__(self) -> int:
        return hash((self.execution_id, self.sequence))

    def __repr__(self) -> str:
        return f"Event(sequence={self.sequence}, type={self.type!r}, data={self.data!r})"

    @property
    def is_terminal(self) -> bool:
        """Whether this is the last event of its execution (``turn_ended``, ``job_ended`` or
        ``failed``)."""
        return self.type in TERMINAL_EVENT_TYPES

    def _str(self, key: str, of: str | None = None) -> str | None:
        value = self.data.get(key) if of is None or self.type == of else None
        return value if isinstance(value, str) else None

    def _int(self, key: str) -> int | None:
        value = self.data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def text(self) -> str | None:
        """The new text of a ``text_delta``."""
        return self._str("text")

    @property
    def outcome(self) -> str | None:
        """The outcome of a ``turn_ended``: ``completed``, ``max_steps``, ..."""
        return self._str("outcome")

    @property
    def step(self) -> int | None:
        """The model step of a step, text, tool call or tool result event."""
        return self._int("step")

    @property
    def attempt(self) -> int | None:
        """The attempt within the step of a ``model_step_started`` or ``text_delta``."""
        return self._int("attempt")

    @property
    def usage(self) -> Usage | None:
        """What the whole Turn used, on ``turn_ended``."""
        from .types import Usage

        value = self.data.get("usage")
        return Usage.from_dict(value) if isinstance(value, dict) else None

    @property
    def category(self) -> str | None:
        """The safe category of a ``failed`` event (``model_provider``, ``tool``, ...)."""
        return self._str("category")

    @property
    def error_id(self) -> str | None:
        """The ID of the sealed failure record of a ``failed`` event."""
        return self._str("error_id")

    @property
    def tool_call(self) -> ToolCall | None:
        """The call of a ``tool_call`` event."""
        from .types import ToolCall

        return ToolCall.from_dict(self.data["call"]) if self.type == "tool_call" else None

    @property
    def tool_result(self) -> ToolResult | None:
        """The result of a ``tool_result`` event."""
        from .types import ToolResult

        return ToolResult.from_dict(self.data["result"]) if self.type == "tool_result" else None

    @property
    def child_id(self) -> str | None:
        """The child execution a ``child_started`` event names (its ``kind`` in
        ``data["kind"]``)."""
        return self._str("child_id", "child_started")

    @property
    def request_id(self) -> str | None:
        """The approval request of an ``approval_requested`` event."""
        return self._str("request_id", "approval_requested")

    @property
    def requested_call(self) -> ToolCall | None:
        """The call an ``approval_requested`` event asks a decision for."""
        from .types import ToolCall

        return ToolCall.from_dict(self.data["call"]) if self.type == "approval_requested" else None

    @property
    def state(self) -> str | None:
        """The end state of a ``job_ended`` event: ``completed`` or ``cancelled``."""
        return self._str("state", "job_ended")
