"""httpx-aware helpers shared by the sync and async clients (no IO here, only decisions about IO).

Which transport failures may be retried: a refused or timed-out *connect* never reached the server, so any request
may be sent again. A failure after the request was sent (read error, read timeout) may have started a generation:
a POST is then not repeated (it would start a second one); a GET (resume, retrieve) is.
"""

from __future__ import annotations

from typing import Any

import httpx

from respstream.client.core import ClientConfig
from respstream.client.errors import APIConnectionError, APITimeoutError, status_error
from respstream.client.retry import RETRYABLE_STATUS
from respstream.errors import APIStatusError, RemoteProtocolError, RespstreamError

__all__ = [
    "json_or_error",
    "request_timeout",
    "retryable_error",
    "stream_request_body",
    "stream_timeout",
    "wrap_transport_error",
]


def stream_timeout(config: ClientConfig) -> httpx.Timeout:
    """The read timeout of a stream is the idle timeout: any bytes, keep-alive comments included, reset it."""
    return httpx.Timeout(config.timeout, read=config.idle_timeout)


def request_timeout(config: ClientConfig) -> httpx.Timeout:
    return httpx.Timeout(config.timeout)


def stream_request_body(request: dict[str, Any]) -> dict[str, Any]:
    """The POST body of ``client.stream(**request)``: the request with ``stream: true``.

    Raises ``ValueError`` for ``stream=False`` (use ``create()``), so a caller never waits on a stream that never comes.
    """
    if request.get("stream") is False:
        raise ValueError("client.stream() always streams; use client.create() for a non-streaming call")
    return {**request, "stream": True}


def wrap_transport_error(exc: httpx.HTTPError, method: str, url: str) -> tuple[RespstreamError, bool]:
    """(our exception, may the request be sent again) for an httpx failure before any answer arrived."""
    where = f"{method} {url}"
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return APITimeoutError(f"timed out connecting to {where}"), True
    if isinstance(exc, httpx.ConnectError):
        return APIConnectionError(f"cannot connect to {where}: {exc or type(exc).__name__}"), True
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"no answer from {where} in time"), method == "GET"
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return APIConnectionError(f"bad URL for {where}: {exc}"), False
    return APIConnectionError(f"connection to {where} failed: {exc or type(exc).__name__}"), method == "GET"


def retryable_error(error: RespstreamError) -> bool:
    """May a request that failed this way before streaming be retried (a resume GET, say)?"""
    if isinstance(error, APIStatusError):
        return error.status_code in RETRYABLE_STATUS
    return isinstance(error, APIConnectionError)


def json_or_error(response: httpx.Response, body: bytes) -> Any:
    """Parse a non-streaming answer. Raises the typed ``APIStatusError`` for non-2xx, ``RemoteProtocolError`` for a
    2xx whose body is not JSON (a captive portal, a proxy page)."""
    if response.status_code >= 300:
        raise status_error(response.status_code, response.headers, body, url=str(response.request.url))
    if response.status_code == 204 or not body:
        return None
    try:
        return response.json()
    except ValueError as exc:
        raise RemoteProtocolError(
            f"{response.request.method} {response.request.url} answered {response.status_code} with a body that is "
            f"not JSON: {body[:80]!r}"
        ) from exc
