"""The native module (Rust, pyo3): a thin layer over the OpenBot core. Use the ``openbot``
package instead; these names may change between releases."""

from collections.abc import Awaitable, Callable
from typing import Any, final

__all__ = [
    "noop",
    "register_errors",
    "connect_sync",
    "connect_async",
    "NativeClient",
    "NativeEvents",
    "__version__",
]

__version__: str

def noop() -> None:
    """Does nothing: measures the cost of one call into the native module."""

def register_errors(base: type[BaseException], by_code: dict[str, Any]) -> None:
    """Registers the exception class of each stable error code."""

def connect_sync(
    uri: str,
    token: str | None = None,
    tools: list[tuple[str, Callable[[Any], Any], bool]] = ...,
) -> NativeClient:
    """Connects and waits with the GIL released."""

def connect_async(
    uri: str,
    token: str | None = None,
    tools: list[tuple[str, Callable[[Any], Any], bool]] = ...,
) -> Awaitable[NativeClient]:
    """Connects; an awaitable of the running event loop."""

@final
class NativeClient:
    """A connected client (either mode)."""

    def call_sync(self, op: str, a: Any = None, b: Any = None) -> Any:
        """Runs a Client operation and waits with the GIL released."""

    def call_async(self, op: str, a: Any = None, b: Any = None) -> Awaitable[Any]:
        """Runs a Client operation; an awaitable."""

    def observe_sync(self, id: str, after: int) -> NativeEvents:
        """Opens an execution's events."""

    def observe_async(self, id: str, after: int) -> Awaitable[NativeEvents]:
        """Opens an execution's events; an awaitable."""

    def close_sync(self) -> None:
        """Closes the client."""

    def close_async(self) -> Awaitable[None]:
        """Closes the client; an awaitable."""

@final
class NativeEvents:
    """An open stream of events."""

    def next_sync(self) -> list[dict[str, Any]] | None:
        """The next events, or None after the last."""

    def next_async(self) -> Awaitable[list[dict[str, Any]] | None]:
        """The next events, or None after the last; an awaitable."""

    def close(self) -> None:
        """Stops reading."""
