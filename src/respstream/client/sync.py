"""The blocking client: :class:`Client`, which opens the :class:`~respstream.client.sync_stream.ResponseStream`.

:mod:`respstream.client.async_` is its twin, with the same methods in the same order; the streams they return live in
:mod:`respstream.client.sync_stream` and :mod:`respstream.client.async_stream`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from respstream.client._base import (
    json_or_error,
    request_timeout,
    stream_request_body,
    stream_timeout,
    wrap_transport_error,
)
from respstream.client.core import ClientConfig, StreamDriver, resolve_api_key, resolve_base_url
from respstream.client.errors import status_error
from respstream.client.retry import RetryPolicy
from respstream.client.sync_stream import ResponseStream
from respstream.client.ws_sync import WebSocketConnection
from respstream.errors import RespstreamError

__all__ = ["Client"]


class Client:
    """Talks to any ``/v1/responses`` server: OpenAI, the seed platform, the respstream gateway.

    ``base_url`` defaults to ``RESPSTREAM_BASE_URL``, then ``OPENAI_BASE_URL``, then ``https://api.openai.com/v1``;
    ``api_key`` to ``RESPSTREAM_API_KEY``, then ``OPENAI_API_KEY`` (sent as ``Authorization: Bearer``).
    ``timeout`` bounds connecting and non-streaming calls; ``idle_timeout`` is the longest silence a stream may
    keep (keep-alive comments count as activity). ``max_retries`` applies before a stream starts; ``retry``
    replaces the whole policy (backoff, resume attempts, jitter RNG). ``http_client`` is used as is and not closed.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        idle_timeout: float = 60.0,
        max_retries: int = 2,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
        headers: dict[str, str] | None = None,
        window: int = 64,
        max_event_size: int = 16 << 20,
    ) -> None:
        policy = retry if retry is not None else RetryPolicy(max_retries=max_retries)
        self.config = ClientConfig(
            base_url=resolve_base_url(base_url), api_key=resolve_api_key(api_key), timeout=timeout,
            idle_timeout=idle_timeout, retry=policy, window=window, max_event_size=max_event_size,
            headers=dict(headers or {}),
        )
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client(follow_redirects=True)
        self._sleep: Callable[[float], None] = time.sleep

    def stream(self, **request: Any) -> ResponseStream:
        """``POST /responses`` with ``stream: true``; returns the open :class:`ResponseStream`.

        A background request (``background=True``) resumes by itself after a dropped connection.
        Raises ``APIStatusError`` (or a subclass) for an HTTP error, ``APIConnectionError`` when unreachable.
        """
        body = stream_request_body(request)
        driver = StreamDriver(self.config, resumable=bool(body.get("background")))
        stream = ResponseStream(self, driver)
        stream._response = self._open("POST", self.config.url("responses"), json=body)
        return stream

    def connect(self) -> WebSocketConnection:
        """Open a WebSocket to ``/responses`` (WebSocket mode): many sequential responses on one connection."""
        return WebSocketConnection(self.config)

    def resume(self, response_id: str, *, starting_after: int | None = None) -> ResponseStream:
        """Stream a stored (background) response from after ``starting_after`` (from the start when ``None``).

        The stream keeps resuming after dropped connections. A ``204`` (nothing after the cursor) ends it at once.
        Raises like :meth:`stream`.
        """
        driver = StreamDriver(self.config, resumable=True, response_id=response_id, starting_after=starting_after)
        stream = ResponseStream(self, driver)
        url, params, headers = self.config.resume_request(response_id, starting_after)
        stream._response = self._open("GET", url, params=params, headers=headers)
        return stream

    def create(self, **request: Any) -> Any:
        """``POST /responses`` without streaming; returns the Response JSON (a dict). Raises like :meth:`stream`."""
        return self._call("POST", "responses", json={**request, "stream": False})

    def retrieve(self, response_id: str) -> Any:
        """``GET /responses/{id}``: the Response JSON. Raises ``NotFoundError`` for an unknown id."""
        return self._call("GET", f"responses/{response_id}")

    def cancel(self, response_id: str) -> Any:
        """``POST /responses/{id}/cancel`` (background responses only); returns the Response JSON."""
        return self._call("POST", f"responses/{response_id}/cancel")

    def delete(self, response_id: str) -> Any:
        """``DELETE /responses/{id}``; returns the server's confirmation JSON."""
        return self._call("DELETE", f"responses/{response_id}")

    def close(self) -> None:
        """Close the connection pool (unless it was passed in)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- IO with retries before anything streamed ---------------------------------------------------------------

    def _call(self, method: str, path: str, *, json: Any = None) -> Any:
        url = self.config.url(path)
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method, url, json=json, headers=self.config.request_headers(stream=False),
                    timeout=request_timeout(self.config),
                )
            except httpx.HTTPError as exc:
                error, retryable = wrap_transport_error(exc, method, url)
                if retryable and attempt < self.config.retry.max_retries:
                    self._sleep(self.config.retry.delay(attempt))
                    attempt += 1
                    continue
                raise error from exc
            try:
                return json_or_error(response, response.content)
            except RespstreamError as error:
                delay = self._retry_delay(error, attempt)
                if delay is None:
                    raise
                self._sleep(delay)
                attempt += 1

    def _retry_delay(self, error: RespstreamError, attempt: int) -> float | None:
        policy = self.config.retry
        status = getattr(error, "status_code", None)
        if status is None or not policy.should_retry_status(status, attempt):
            return None
        return policy.delay_for(attempt, getattr(error, "retry_after", None))

    def _open(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        retries: bool = True,
    ) -> httpx.Response:
        """Send and return the streaming response (status 2xx), retrying what is safe to retry before streaming."""
        attempt = 0
        max_retries = self.config.retry.max_retries if retries else 0
        while True:
            request = self._http.build_request(
                method, url, json=json, params=params, headers=headers or self.config.request_headers(stream=True),
                timeout=stream_timeout(self.config),
            )
            try:
                response = self._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                error, retryable = wrap_transport_error(exc, method, url)
                if retryable and attempt < max_retries:
                    self._sleep(self.config.retry.delay(attempt))
                    attempt += 1
                    continue
                raise error from exc
            if response.status_code < 300:
                return response
            try:
                body = response.read()
            except httpx.HTTPError:
                body = b""
            finally:
                response.close()
            error = status_error(response.status_code, response.headers, body, url=str(request.url))
            delay = self._retry_delay(error, attempt) if attempt < max_retries else None
            if delay is None:
                raise error
            self._sleep(delay)
            attempt += 1
