"""OpenBot for Python.

``await openbot.connect("memory://")`` runs Bots in this process; ``await
openbot.connect("http://host:port", token=...)`` talks to an OpenBot server. Both give the same
:class:`AsyncClient`; :func:`connect_sync` gives the blocking :class:`Client` with the same
methods.
"""

from __future__ import annotations

import atexit

from . import _native
from .client import (
    ApprovalRef,
    AsyncClient,
    AsyncEventStream,
    BotRef,
    ChatRef,
    Client,
    EventStream,
    ExecutionRef,
    Input,
    ToolSpec,
    connect,
    connect_sync,
)
from .errors import (
    CancelledError,
    ClosedError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    OpenBotError,
    PayloadTooLargeError,
    RateLimitedError,
    RequestFailedError,
    UnauthorizedError,
    UnavailableError,
    UnsupportedMediaTypeError,
    ERRORS_BY_CODE,
)
from .tools import ToolFunction, tool_definition
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
    ToolCall,
    ToolDefinition,
    ToolResult,
    UnknownOutcome,
    UnknownOutcomePage,
    Usage,
)

_native.register_errors(OpenBotError, ERRORS_BY_CODE)
# At exit, tool calls stop entering Python and the ones inside it get a moment to return: a
# runtime thread entering a finalizing interpreter would crash the process.
atexit.register(_native.shutdown)

__version__: str = _native.__version__

__all__ = [
    "ApprovalRef",
    "ApprovalRequest",
    "ApprovalState",
    "AsyncClient",
    "AsyncEventStream",
    "Bot",
    "BotRef",
    "CancelledError",
    "Chat",
    "ChatEntry",
    "ChatRef",
    "Client",
    "ClosedError",
    "ConflictError",
    "Decision",
    "Event",
    "EventStream",
    "Execution",
    "ExecutionRef",
    "ForbiddenError",
    "Input",
    "InvalidInputError",
    "Limits",
    "NotFoundError",
    "OpenBotError",
    "OutcomeDecision",
    "OutcomeDecisionRecord",
    "PayloadTooLargeError",
    "RateLimitedError",
    "RequestFailedError",
    "SendReceipt",
    "ToolCall",
    "ToolDefinition",
    "ToolFunction",
    "ToolResult",
    "ToolSpec",
    "UnauthorizedError",
    "UnavailableError",
    "UnknownOutcome",
    "UnknownOutcomePage",
    "UnsupportedMediaTypeError",
    "Usage",
    "connect",
    "connect_sync",
    "tool_definition",
]
