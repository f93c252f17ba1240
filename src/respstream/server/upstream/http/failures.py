"""How a failed exchange with an upstream becomes an :class:`~respstream.server.upstream.base.UpstreamError`.

For both upstream APIs (chat/adapter.py, responses/adapter.py); the codes the router and the client see:

=========================  ==================================================================================
``upstream_timeout``       connect timeout, idle timeout (no bytes for ``idle_timeout`` s), generation deadline
``upstream_unavailable``   connection refused / DNS failure
``upstream_error``         5xx or other non-200 status, malformed chunk, an ``error`` payload, connection reset,
                           stream ended before a finish reason
``rate_limited``           HTTP 429 (``retry_after`` kept from ``Retry-After``), or this upstream's queue is full
                           (waited ``queue_timeout`` s for a slot; message says "busy")
=========================  ==================================================================================

How this works: :func:`status_failure` reads (the first 64 KiB of) a non-200 answer's body for its message
(:func:`~respstream.server.upstream.chat_wire.error_message`); :func:`transport_failure` maps the lean HTTP client's
errors (:mod:`~respstream.server.upstream.http.stream`). The malformed-stream, deadline and queue errors are raised
where they are found. Every message starts with the upstream's name.
"""

from __future__ import annotations

from respstream.server.upstream.base import UpstreamError
from respstream.server.upstream.chat_wire import error_message, parse_retry_after
from respstream.server.upstream.http.stream import (
    ConnectError,
    ConnectTimeout,
    HTTPStreamError,
    IdleTimeout,
    StreamResponse,
)

__all__ = ["status_failure", "transport_failure"]

_MAX_ERROR_BODY = 64 * 1024


async def status_failure(name: str, response: StreamResponse) -> UpstreamError:
    """A non-200 answer of upstream ``name``: ``rate_limited`` for 429, else ``upstream_error``; the status kept."""
    body = await response.read_all(_MAX_ERROR_BODY)
    status = response.status_code
    message = f"{name}: HTTP {status}: {error_message(body)}"
    if status == 429:
        return UpstreamError("rate_limited", message, status=status,
                             retry_after=parse_retry_after(response.headers.get("retry-after")))
    return UpstreamError("upstream_error", message, status=status)


def transport_failure(exc: HTTPStreamError, *, name: str, base_url: str, connect_timeout: float,
                      idle_timeout: float, before_first_token: bool) -> UpstreamError:
    """An error of the lean HTTP client talking to upstream ``name`` at ``base_url`` (its timeouts in the message)."""
    if isinstance(exc, ConnectTimeout):
        return UpstreamError("upstream_timeout", f"{name}: connect timeout after {connect_timeout:g} s",
                             before_first_token=before_first_token)
    if isinstance(exc, IdleTimeout):
        return UpstreamError("upstream_timeout", f"{name}: no data for {idle_timeout:g} s (idle timeout)",
                             before_first_token=before_first_token)
    if isinstance(exc, ConnectError):
        return UpstreamError("upstream_unavailable", f"{name}: cannot connect to {base_url}: {exc}",
                             before_first_token=before_first_token)
    return UpstreamError("upstream_error", f"{name}: connection failed mid-stream ({exc})",
                         before_first_token=before_first_token)
