"""The exceptions of OpenBot: one class per stable error code, all subclasses of
:class:`OpenBotError`. Branch on the class (or on ``.code``), never on the message."""

from __future__ import annotations


class OpenBotError(Exception):
    """An error from an OpenBot call.

    ``code`` is the stable error code (``not_found``, ``invalid_input``, ...); for faults,
    ``category`` is a safe category (``model_provider``, ``storage``, ...) and ``error_id``
    names the sealed record with the full cause.
    """

    code: str
    message: str
    category: str | None
    error_id: str | None

    def __init__(
        self,
        message: str,
        *,
        code: str = "request_failed",
        category: str | None = None,
        error_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.category = category
        self.error_id = error_id

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.error_id is not None:
            text += f" (error id {self.error_id})"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, code={self.code!r}, "
            f"category={self.category!r}, error_id={self.error_id!r})"
        )


class InvalidInputError(OpenBotError):
    """The input is malformed or breaks a rule; the message says which (``invalid_input``)."""


class UnauthorizedError(OpenBotError):
    """No valid credentials (``unauthorized``)."""


class ForbiddenError(OpenBotError):
    """Valid credentials without the right to do this (``forbidden``)."""


class NotFoundError(OpenBotError):
    """The resource does not exist or is not visible to the caller (``not_found``)."""


class ConflictError(OpenBotError):
    """The request conflicts with the current state: a changed revision, a command key reused
    with other input, a closed resource (``conflict``)."""


class PayloadTooLargeError(OpenBotError):
    """The body is larger than the documented limit (``payload_too_large``)."""


class UnsupportedMediaTypeError(OpenBotError):
    """The body's content type is not accepted (``unsupported_media_type``)."""


class RateLimitedError(OpenBotError):
    """Too many requests; try again later (``rate_limited``)."""


class CancelledError(OpenBotError):
    """The work was cancelled (``cancelled``). Not :class:`asyncio.CancelledError`, which is
    what an awaiting task gets when the task itself is cancelled."""


class ClosedError(OpenBotError):
    """The client was closed, or was made in the process this one was forked from
    (``closed``)."""


class UnavailableError(OpenBotError):
    """The service could not be reached (``unavailable``)."""


class RequestFailedError(OpenBotError):
    """A fault on the serving side; ``category`` and ``error_id`` name it
    (``request_failed``)."""


#: The class of each stable error code.
ERRORS_BY_CODE: dict[str, type[OpenBotError]] = {
    "invalid_input": InvalidInputError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "rate_limited": RateLimitedError,
    "cancelled": CancelledError,
    "closed": ClosedError,
    "unavailable": UnavailableError,
    "request_failed": RequestFailedError,
}

__all__ = [
    "OpenBotError",
    "InvalidInputError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "UnsupportedMediaTypeError",
    "RateLimitedError",
    "CancelledError",
    "ClosedError",
    "UnavailableError",
    "RequestFailedError",
    "ERRORS_BY_CODE",
]
