"""The native module (Rust, pyo3): a thin layer over the OpenBot core. Use the ``openbot_platform``
package instead; these names may change between releases."""

from collections.abc import Callable
from typing import Any, final

__all__ = [
    "noop",
    "computer_tools",
    "enable_tracing",
    "flush_tracing",
    "shutdown",
    "register_errors",
    "connect_sync",
    "connect_async",
    "NativeClient",
    "NativeEvents",
    "Bridge",
    "Pending",
    "__version__",
]

__version__: str

def noop() -> None:
    """Does nothing: measures the cost of one call into the native module."""

def enable_tracing(endpoint: str | None = None, service_name: str | None = None) -> bool:
    """Turns on the OTLP/HTTP export of this process's agent spans; whether it is on."""

def flush_tracing() -> None:
    """Exports the spans queued so far, now."""

def shutdown(timeout: float = 5.0) -> int:
    """At interpreter exit: tool calls stop entering Python; waits up to ``timeout`` seconds
    for those inside it. Returns how many are still running."""

def register_errors(base: type[BaseException], by_code: dict[str, Any]) -> None:
    """Registers the exception class of each stable error code."""

def computer_tools() -> list[str]:
    """The Computer tools' names, as the core declares them."""

def connect_sync(
    uri: str,
    token: str | None = None,
    tools: list[tuple[str, Callable[[Any], Any], bool]] = ...,
    outbound: str | None = None,
    computer: tuple[list[str], bool] | None = None,
) -> NativeClient:
    """Connects and waits with the GIL released."""

def connect_async(
    bridge: Bridge,
    ticket: int,
    uri: str,
    token: str | None = None,
    tools: list[tuple[str, Callable[[Any], Any], bool]] = ...,
    outbound: str | None = None,
    computer: tuple[list[str], bool] | None = None,
) -> _Started:
    """Connects; the NativeClient comes through the bridge. Needs a running event loop."""

#: A started async call: ``(pending, True, None)``, or ``(None, ok, value or exception)`` for
#: a call that was answered at once.
_Started = tuple[Pending | None, bool, Any]

@final
class NativeClient:
    """A connected client (either mode)."""

    def call_sync(
        self,
        op: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        """Runs an API operation (by its operationId) and waits with the GIL released. The
        answer: None, the JSON document, or ``(bytes, media type)``."""

    def call_async(
        self,
        bridge: Bridge,
        ticket: int,
        op: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> _Started:
        """Starts an API operation; the answer comes through the bridge."""

    def observe_sync(self, id: str, after: int) -> NativeEvents:
        """Opens an execution's events."""

    def observe_async(self, bridge: Bridge, ticket: int, id: str, after: int) -> _Started:
        """Opens an execution's events; the NativeEvents come through the bridge."""

    def close_sync(self) -> None:
        """Closes the client."""

    def close_async(self, bridge: Bridge, ticket: int) -> _Started:
        """Closes the client; the answer (None) comes through the bridge."""

@final
class NativeEvents:
    """An open stream of events."""

    def next_sync(self) -> list[dict[str, Any]] | None:
        """The next events, or None after the last."""

    def next_async(self, bridge: Bridge, ticket: int) -> _Started:
        """The next events (a list of dicts, or None after the last) through the bridge."""

    def close(self) -> None:
        """Stops reading."""

@final
class Bridge:
    """Hands the answers of async calls to one event loop through a socket it watches."""

    def __init__(self) -> None: ...
    def fileno(self) -> int:
        """The file descriptor to watch for readability."""

    def drain(self) -> list[tuple[int, bool, Any]]:
        """The answers that arrived: (ticket, ok, value or exception)."""

@final
class Pending:
    """A started call."""

    def cancel(self) -> None:
        """Drops the call: its answer never comes."""
