"""OpenBot for Python (distribution ``openbot-platform``, imported as ``openbot_platform``).

``await openbot_platform.connect("memory://")`` runs Bots in this process; ``await
openbot_platform.connect("http://host:port", token=...)`` talks to an OpenBot server. Both give
the same :class:`AsyncClient`; :func:`connect_sync` gives the blocking :class:`Client` with the
same methods: one per API operation (generated from schema/openapi.json), and handles
(``bot.create_chat()``, ``chat.send()``, ``turn.events()``, ``turn.wait()``).
"""

from __future__ import annotations

import atexit

from . import _native, types
from ._call import AsyncPages, FileContent, Identified, Pages, Ref
from ._extras import TERMINAL_EVENT_TYPES, TERMINAL_STATES
from ._operations import METHODS, OPERATIONS
from .client import (
    ApprovalRef,
    AsyncBotHandle,
    AsyncChatHandle,
    AsyncClient,
    AsyncEventStream,
    AsyncTurn,
    BotHandle,
    BotRef,
    ChatHandle,
    ChatRef,
    Client,
    EventStream,
    ExecutionRef,
    Input,
    Tools,
    ToolSpec,
    Turn,
    TurnEnd,
    connect,
    connect_sync,
)
from .errors import (
    ERRORS_BY_CODE,
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
)
from .tools import ToolFunction, tool_definition
from .types import *  # noqa: F403 (every schema type, generated)

_native.register_errors(OpenBotError, ERRORS_BY_CODE)
# At exit, tool calls stop entering Python and the ones inside it get a moment to return: a
# runtime thread entering a finalizing interpreter would crash the process.
atexit.register(_native.shutdown)

__version__: str = _native.__version__

__all__ = [
    "ApprovalRef",
    "AsyncBotHandle",
    "AsyncChatHandle",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncPages",
    "AsyncTurn",
    "BotHandle",
    "BotRef",
    "CancelledError",
    "ChatHandle",
    "ChatRef",
    "Client",
    "ClosedError",
    "ConflictError",
    "ERRORS_BY_CODE",
    "EventStream",
    "ExecutionRef",
    "FileContent",
    "ForbiddenError",
    "Identified",
    "Input",
    "InvalidInputError",
    "METHODS",
    "NotFoundError",
    "OPERATIONS",
    "OpenBotError",
    "Pages",
    "PayloadTooLargeError",
    "RateLimitedError",
    "Ref",
    "RequestFailedError",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_STATES",
    "ToolFunction",
    "ToolSpec",
    "Tools",
    "Turn",
    "TurnEnd",
    "UnauthorizedError",
    "UnavailableError",
    "UnsupportedMediaTypeError",
    "connect",
    "connect_sync",
    "tool_definition",
    "types",
    *types.__all__,
]
