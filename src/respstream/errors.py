"""One exception root for everything respstream raises on purpose, with stable codes.

Foreign errors (httpx, msgspec, sqlite3, redis) are wrapped at the boundary: ``raise StreamError(...) from exc``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from respstream.protocol.assembler import AssembledResponse

__all__ = [
    "APIStatusError",
    "BadInputError",
    "EventTooLarge",
    "RemoteProtocolError",
    "ResponseCancelled",
    "ResponseFailed",
    "ResponseIncomplete",
    "RespstreamError",
    "StreamError",
    "StreamTimeout",
    "StreamTruncated",
]


class RespstreamError(Exception):
    """Root of every error respstream raises on purpose."""

    code = "error"


class BadInputError(RespstreamError):
    """The bytes are not an event stream (HTML page, invalid JSON, a non-object event). Says where."""

    code = "input.invalid"

    def __init__(self, message: str, *, event_number: int | None = None, byte_offset: int | None = None) -> None:
        super().__init__(message)
        self.event_number = event_number
        self.byte_offset = byte_offset


class EventTooLarge(BadInputError):
    """One SSE event grew past the configured maximum size."""

    code = "input.event_too_large"


class RemoteProtocolError(RespstreamError):
    """The peer sent something the protocol does not allow, badly enough that we cannot go on."""

    code = "protocol.remote"


class _OutcomeError(RespstreamError):
    """A stream that ended, but not with a completed response. Carries what was assembled."""

    def __init__(self, message: str, *, response: AssembledResponse | None = None) -> None:
        super().__init__(message)
        self.response = response


class ResponseFailed(_OutcomeError):
    """Terminal ``response.failed``."""

    code = "response.failed"


class ResponseIncomplete(_OutcomeError):
    """Terminal ``response.incomplete`` (or a terminal response whose status is ``incomplete``)."""

    code = "response.incomplete"


class ResponseCancelled(_OutcomeError):
    """The response was cancelled (``error`` with code ``cancelled`` or a terminal status ``cancelled``)."""

    code = "response.cancelled"


class StreamError(_OutcomeError):
    """A terminal ``error`` event. ``error_code`` is the server's code (``internal_error``, ``upstream_timeout``...)."""

    code = "stream.error"

    def __init__(
        self, message: str, *, error_code: str | None, response: AssembledResponse | None = None
    ) -> None:
        super().__init__(message, response=response)
        self.error_code = error_code


class StreamTruncated(_OutcomeError):
    """EOF without a terminal event. ``partial`` is what arrived; ``last_sequence_number`` the last one delivered."""

    code = "stream.truncated"

    def __init__(
        self, message: str, *, partial: AssembledResponse | None, last_sequence_number: int | None
    ) -> None:
        super().__init__(message, response=partial)
        self.partial = partial
        self.last_sequence_number = last_sequence_number


class StreamTimeout(StreamTruncated):
    """No bytes (not even a keep-alive comment) arrived within the idle-read timeout."""

    code = "stream.timeout"


class APIStatusError(RespstreamError):
    """The server answered with a non-2xx status before streaming. Carries the parsed error envelope."""

    code = "http.status"

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        error_code: str | None = None,
        error_type: str | None = None,
        param: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_code = error_code
        self.error_type = error_type
        self.param = param
        self.body = body
        self.retry_after = retry_after
