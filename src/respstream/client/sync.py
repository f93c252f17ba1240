"""The blocking client: :class:`Client` and the :class:`ResponseStream` it returns.

A thin loop over :class:`~respstream.client.core.StreamDriver`; :mod:`respstream.client.async_` is its twin, with the
same methods in the same order. Only bytes move here; every decision is the driver's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from types import TracebackType
from typing import Any

import httpx

from respstream.client._base import (
    json_or_error,
    request_timeout,
    retryable_error,
    stream_request_body,
    stream_timeout,
    wrap_transport_error,
)
from respstream.client.core import ClientConfig, Step, StreamDriver, resolve_api_key, resolve_base_url
from respstream.client.errors import status_error
from respstream.client.handlers import Handlers
from respstream.client.retry import RetryPolicy
from respstream.client.ws_sync import WebSocketConnection
from respstream.errors import RespstreamError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

__all__ = ["Client", "ResponseStream"]


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


class ResponseStream:
    """One streamed response. Iterate it for typed events in sequence order, or register handlers and call
    :meth:`until_done`; :meth:`result` gives the assembled response.

    Iterating raises ``StreamTruncated`` (``StreamTimeout`` after an idle timeout) when a foreground stream drops,
    ``BadInputError`` when the body is not an event stream, and whatever a handler raises. A failed, incomplete,
    errored or cancelled response is not an iteration error: :meth:`result` raises for it.
    """

    def __init__(self, client: Client, driver: StreamDriver) -> None:
        self._client = client
        self._driver = driver
        self._handlers = Handlers()
        self._response: httpx.Response | None = None
        self._gen: Generator[Event, None, None] | None = None
        self._failure: BaseException | None = None
        self._closed = False

    # --- handlers ---------------------------------------------------------------------------------------------

    def on(self, event_type: str, fn: Callable[[Any], Any]) -> ResponseStream:
        """Call ``fn(event)`` for every event of ``event_type`` (``"*"``: every event). Returns the stream."""
        self._handlers.on(event_type, fn)
        return self

    def on_text(self, fn: Callable[[str], Any]) -> ResponseStream:
        """``fn(delta)`` for each output text delta."""
        self._handlers.on_text(fn)
        return self

    def on_tool_call(self, fn: Callable[[Any], Any]) -> ResponseStream:
        """``fn(ToolCallUpdate)`` when a tool call starts, gets an arguments delta, and is done."""
        self._handlers.on_tool_call(fn)
        return self

    def on_refusal(self, fn: Callable[[str], Any]) -> ResponseStream:
        self._handlers.on_refusal(fn)
        return self

    def on_routing(self, fn: Callable[[Any], Any]) -> ResponseStream:
        """``fn(RoutingCompleted)``: the gateway picked a model for ``model: "auto"``."""
        self._handlers.on_routing(fn)
        return self

    def on_rewrite(self, fn: Callable[[Any], Any]) -> ResponseStream:
        """``fn(RewriteInProgress)``: the text already streamed is about to be replaced by the ``*.done`` text."""
        self._handlers.on_rewrite(fn)
        return self

    def on_completed(self, fn: Callable[[AssembledResponse], Any]) -> ResponseStream:
        self._handlers.on_completed(fn)
        return self

    def on_failed(self, fn: Callable[[RespstreamError], Any]) -> ResponseStream:
        """``fn(error)`` with the exception :meth:`result` raises (failed, incomplete, error, cancelled, truncated)."""
        self._handlers.on_failed(fn)
        return self

    # --- consuming --------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Event]:
        if self._gen is None:
            self._gen = self._run()
        return self._gen

    def until_done(self) -> ResponseStream:
        """Consume the stream (running handlers) to its end. Raises like iteration."""
        for _ in self:
            pass
        return self

    def result(self) -> AssembledResponse:
        """Consume what is left and return the assembled response.

        Raises ``ResponseFailed``, ``ResponseIncomplete``, ``ResponseCancelled``, ``StreamError`` (``error_code``) or
        ``StreamTruncated`` (``partial``, ``last_sequence_number``); each carries the assembled response.
        """
        if self._failure is None and not self._closed:
            try:
                self.until_done()
            except RespstreamError:
                pass  # stored in the driver or in _failure; re-raised below in one place
        if self._failure is not None:
            raise self._failure
        if not self._driver.finished:
            self._driver.finish()  # closed early: whatever arrived is the outcome
        return self._driver.outcome()

    @property
    def response_id(self) -> str | None:
        return self._driver.response_id

    @property
    def last_sequence_number(self) -> int | None:
        """The highest contiguous sequence number delivered so far (the resume cursor)."""
        return self._driver.cursor

    @property
    def resumes(self) -> int:
        """How many times this stream reconnected."""
        return self._driver.resumes

    def snapshot(self) -> AssembledResponse:
        """The response as assembled so far (``status`` stays ``truncated`` until a terminal arrives)."""
        return self._driver.result_now()

    def close(self) -> None:
        """Stop reading and release the connection. Idempotent."""
        self._closed = True
        if self._gen is not None:
            self._gen.close()
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> ResponseStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the loop ---------------------------------------------------------------------------------------------

    def _run(self) -> Generator[Event, None, None]:
        try:
            yield from self._loop()
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                self._failure = exc if exc is not self._driver.error else None
            raise

    def _loop(self) -> Generator[Event, None, None]:
        driver, handlers = self._driver, self._handlers
        while True:
            response = self._response
            if response is None or response.status_code == 204:
                if response is not None:
                    response.close()
                step = driver.resume_not_needed()
            else:
                step = yield from self._read(response)
            while True:
                for event in step.events:
                    handlers.dispatch(event)
                    yield event
                if step.action != "resume":
                    self._finish(step)
                    return
                next_step = self._reconnect(step)
                if next_step is None:
                    break  # connected: read the new body
                step = next_step

    def _read(self, response: httpx.Response) -> Generator[Event, None, Step]:
        driver, handlers = self._driver, self._handlers
        driver.connection_started(response.headers.get("content-type"), response.headers.get("x-response-id"))
        cause: BaseException | None = None
        timed_out = False
        try:
            for chunk in response.iter_bytes():
                for event in driver.feed(chunk):
                    handlers.dispatch(event)
                    yield event
                if driver.stop_reading:
                    break
        except httpx.TimeoutException as exc:
            cause, timed_out = exc, True
        except httpx.TransportError as exc:  # read error, broken chunked body, connection reset
            cause = exc
        finally:
            response.close()
        return driver.connection_ended(cause, timed_out=timed_out)

    def _reconnect(self, step: Step) -> Step | None:
        """Wait, then GET the resume URL. ``None`` when a body streams; else the driver's next step."""
        driver, client = self._driver, self._client
        client._sleep(step.delay)
        assert driver.response_id is not None  # the driver only resumes a known response
        url, params, headers = client.config.resume_request(driver.response_id, driver.cursor)
        try:
            self._response = client._open("GET", url, params=params, headers=headers, retries=False)
        except RespstreamError as error:
            return driver.resume_failed(error, retryable=retryable_error(error))
        return None

    def _finish(self, step: Step) -> None:
        result = self._driver.result_now()
        self._handlers.finish(result, self._driver.error)
        if step.action == "raise" and step.error is not None:
            raise step.error
