"""The one call path of the generated operations (``_operations.py``): an operation by its
``operationId``, its parameters and body in, its answer out, through the native module's one
generic ``call`` (the core's ``Client::call``). Also what the generated methods share: paged
lists as iterators, file content, IDs given as objects."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, Union

from . import _bridge, _native
from ._extras import _encode

__all__ = ["AsyncCaller", "SyncCaller", "AsyncPages", "Pages", "FileContent", "Ref", "Identified"]

T = TypeVar("T")


class Identified(Protocol):
    """Anything with an ``id``: a Bot, a Chat, a token, a handle."""

    @property
    def id(self) -> str: ...


#: An ID, or an object that has one.
Ref = Union[str, Identified]


def _ref(value: Ref) -> str:
    if isinstance(value, str):
        return value
    # A receipt of a send names its execution.
    found = getattr(value, "id", None) or getattr(value, "execution_id", None)
    if isinstance(found, str):
        return found
    raise TypeError(f"expected an ID (str) or an object with an id, not {type(value).__name__}")


def _body(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON body from keyword arguments: those left None are left out."""
    return {k: _encode(v) for k, v in fields.items() if v is not None}


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _encode(v) for k, v in params.items() if v is not None}


@dataclass(frozen=True)
class FileContent:
    """Bytes an operation answered (a file's content), with their media type."""

    data: bytes
    content_type: str

    @classmethod
    def of(cls, answer: Any) -> FileContent:
        data, content_type = answer
        return cls(data=bytes(data), content_type=str(content_type))

    @property
    def text(self) -> str:
        """The bytes as UTF-8 text."""
        return self.data.decode("utf-8")


class AsyncCaller:
    """Sends an operation through the native client and awaits its answer."""

    _native: _native.NativeClient

    async def _call_op(
        self,
        op: str,
        params: Mapping[str, Any],
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        native, wanted = self._native, _params(params)
        return await _bridge.call(
            lambda bridge, ticket: native.call_async(bridge, ticket, op, wanted, body, content_type)
        )


class SyncCaller:
    """Sends an operation through the native client and waits (GIL released) for its answer."""

    _native: _native.NativeClient

    def _call_op(
        self,
        op: str,
        params: Mapping[str, Any],
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        return self._native.call_sync(op, _params(params), body, content_type)


class AsyncPages(Generic[T]):
    """Every item of a paged list, as an async iterator that asks for the next page when the
    one before is read (``async for item in client.list_...()``); awaited, the list of them
    all (``await client.list_...()``)."""

    def __init__(
        self, page: Callable[[str | None], Awaitable[tuple[list[T], str | None]]], cursor: str | None
    ) -> None:
        self._page = page
        self._cursor = cursor

    def __aiter__(self) -> AsyncIterator[T]:
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        cursor = self._cursor
        while True:
            items, cursor = await self._page(cursor)
            for item in items:
                yield item
            if not cursor:
                return

    async def to_list(self) -> list[T]:
        """Every item, reading every page."""
        return [item async for item in self]

    def __await__(self) -> Generator[Any, None, list[T]]:
        return self.to_list().__await__()


class Pages(Generic[T]):
    """Every item of a paged list, as an iterator that asks for the next page when the one
    before is read (``for item in client.list_...()``). The first page is read at the call, so
    a list the caller may not read fails there, as any other call does."""

    def __init__(self, page: Callable[[str | None], tuple[list[T], str | None]], cursor: str | None) -> None:
        self._page = page
        self._first = page(cursor)

    def __iter__(self) -> Iterator[T]:
        items, cursor = self._first
        while True:
            yield from items
            if not cursor:
                return
            items, cursor = self._page(cursor)

    def to_list(self) -> list[T]:
        """Every item, reading every page."""
        return list(self)
