"""Awaiting native calls: one :class:`_native.Bridge` per event loop.

A call starts on the Rust runtime with a ticket; its answer arrives through the bridge's
socket, which the loop watches, and is set on the caller's future on the loop's own thread.
Cancelling the awaiting task drops the call.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

from . import _native


class _LoopBridge:
    __slots__ = ("native", "pending", "next_ticket", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.native = _native.Bridge()
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_ticket = 0
        loop.add_reader(self.native.fileno(), self._ready)

    def _ready(self) -> None:
        for ticket, ok, value in self.native.drain():
            future = self.pending.pop(ticket, None)
            if future is None or future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBridge] = (
    weakref.WeakKeyDictionary()
)


def call(start: Callable[[_native.Bridge, int], _native._Started]) -> asyncio.Future[Any]:
    """Starts a native call on the running loop's bridge and returns the future of its
    answer. ``start(bridge, ticket)`` starts the call; a call that was ready at once comes
    back answered, and its future is done before it is awaited."""
    loop = asyncio.get_running_loop()
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _LoopBridge(loop)
    ticket = bridge.next_ticket
    bridge.next_ticket += 1
    future: asyncio.Future[Any] = loop.create_future()
    pending, ok, value = start(bridge.native, ticket)
    if pending is None:
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
        return future
    bridge.pending[ticket] = future

    def on_done(done: asyncio.Future[Any], ticket: int = ticket) -> None:
        if done.cancelled():
            pending.cancel()
            bridge.pending.pop(ticket, None)

    future.add_done_callback(on_done)
    return future
