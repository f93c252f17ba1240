"""The asyncio/trio client: :class:`AsyncClient` and the :class:`AsyncResponseStream` it returns.

The twin of :mod:`respstream.client.sync` (same methods, same order, same driver); only the waiting differs.
``client.stream(...)`` returns the stream unopened; it opens on ``await``, ``async with`` or the first ``async for``,
so all three spellings work::

    async with client.stream(input="Hi") as stream:
        async for event in stream: ...
    stream = await client.stream(input="Hi")

Handlers may be coroutine functions: their results are awaited before the event is yielded.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from types import TracebackType
from typing import Any

import anyio
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
from respstream.client.ws_async import AsyncWebSocketConnection
from respstream.errors import RespstreamError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

__all__ = ["AsyncClient", "AsyncResponseStream"]


class AsyncClient:
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
        http_client: httpx.AsyncClient | None = None,
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
        self._http = http_client if http_client is not None else httpx.AsyncClient(follow_redirects=True)
        self._sleep: Callable[[float], Awaitable[None]] = anyio.sleep

    def stream(self, **request: Any) -> AsyncResponseStream:
        """``POST /responses`` with ``stream: true``; returns the :class:`AsyncResponseStream` (opened on first use).

        A background request (``background=True``) resumes by itself after a dropped connection.
        Raises ``APIStatusError`` (or a subclass) for an HTTP error, ``APIConnectionError`` when unreachable.
        """
        body = stream_request_body(request)
        driver = StreamDriver(self.config, resumable=bool(body.get("background")))
        return AsyncResponseStream(self, driver, lambda: self._open("POST", self.config.url("responses"), json=body))

    def connect(self) -> AsyncWebSocketConnection:
        """``async with client.connect() as conn``: a WebSocket to ``/responses`` for many sequential responses."""
        return AsyncWebSocketConnection(self.config)

    def resume(self, response_id: str, *, starting_after: int | None = None) -> AsyncResponseStream:
        """Stream a stored (background) response from after ``starting_after`` (from the start when ``None``).

        The stream keeps resuming after dropped connections. A ``204`` (nothing after the cursor) ends it at once.
        Raises like :meth:`stream`.
        """
        driver = StreamDriver(self.config, resumable=True, response_id=response_id, starting_after=starting_after)
        url, params, headers = self.config.resume_request(response_id, starting_after)
        return AsyncResponseStream(self, driver, lambda: self._open("GET", url, params=params, headers=headers))

    async def create(self, **request: Any) -> Any:
        """``POST /responses`` without streaming; returns the Response JSON (a dict). Raises like :meth:`stream`."""
        return await self._call("POST", "responses", json={**request, "stream": False})

    async def retrieve(self, response_id: str) -> Any:
        """``GET /responses/{id}``: the Response JSON. Raises ``NotFoundError`` for an unknown id."""
        return await self._call("GET", f"responses/{response_id}")

    async def cancel(self, response_id: str) -> Any:
        """``POST /responses/{id}/cancel`` (background responses only); returns the Response JSON."""
        return await self._call("POST", f"responses/{response_id}/cancel")

    async def delete(self, response_id: str) -> Any:
        """``DELETE /responses/{id}``; returns the server's confirmation JSON."""
        return await self._call("DELETE", f"responses/{response_id}")

    async def aclose(self) -> None:
        """Close the connection pool (unless it was passed in)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- IO with retries before anything streamed ---------------------------------------------------------------

    async def _call(self, method: str, path: str, *, json: Any = None) -> Any:
        url = self.config.url(path)
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method, url, json=json, headers=self.config.request_headers(stream=False),
                    timeout=request_timeout(self.config),
                )
            except httpx.HTTPError as exc:
                error, retryable = wrap_transport_error(exc, method, url)
                if retryable and attempt < self.config.retry.max_retries:
                    await self._sleep(self.config.retry.delay(attempt))
                    attempt += 1
                    continue
                raise error from exc
            try:
                return json_or_error(response, await response.aread())
            except RespstreamError as error:
                delay = self._retry_delay(error, attempt)
                if delay is None:
                    raise
                await self._sleep(delay)
                attempt += 1

    def _retry_delay(self, error: RespstreamError, attempt: int) -> float | None:
        policy = self.config.retry
        status = getattr(error, "status_code", None)
        if status is None or not policy.should_retry_status(status, attempt):
            return None
        return policy.delay_for(attempt, getattr(error, "retry_after", None))

    async def _open(
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
                response = await self._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                error, retryable = wrap_transport_error(exc, method, url)
                if retryable and attempt < max_retries:
                    await self._sleep(self.config.retry.delay(attempt))
                    attempt += 1
                    continue
                raise error from exc
            if response.status_code < 300:
                return response
            try:
                body = await response.aread()
            except httpx.HTTPError:
                body = b""
            finally:
                await response.aclose()
            error = status_error(response.status_code, response.headers, body, url=str(request.url))
            delay = self._retry_delay(error, attempt) if attempt < max_retries else None
            if delay is None:
                raise error
            await self._sleep(delay)
            attempt += 1


class AsyncResponseStream:
    """One streamed response; the async twin of :class:`~respstream.client.sync.ResponseStream`.

    ``async for`` gives typed events in sequence order; :meth:`result` gives the assembled response. Raises exactly
    what the sync twin raises, at the same points.
    """

    def __init__(
        self, client: AsyncClient, driver: StreamDriver, opener: Callable[[], Awaitable[httpx.Response]]
    ) -> None:
        self._client = client
        self._driver = driver
        self._opener: Callable[[], Awaitable[httpx.Response]] | None = opener
        self._handlers = Handlers()
        self._response: httpx.Response | None = None
        self._gen: AsyncGenerator[Event, None] | None = None
        self._failure: BaseException | None = None
        self._closed = False

    async def _ensure_open(self) -> AsyncResponseStream:
        """Send the request if not yet sent. Raises ``APIStatusError`` / ``APIConnectionError``."""
        opener, self._opener = self._opener, None
        if opener is not None:
            self._response = await opener()
        return self

    def __await__(self) -> Generator[Any, None, AsyncResponseStream]:
        return self._ensure_open().__await__()

    # --- handlers ---------------------------------------------------------------------------------------------

    def on(self, event_type: str, fn: Callable[[Any], Any]) -> AsyncResponseStream:
        """Call ``fn(event)`` (awaited if it returns an awaitable) for every event of ``event_type`` (``"*"``: all)."""
        self._handlers.on(event_type, fn)
        return self

    def on_text(self, fn: Callable[[str], Any]) -> AsyncResponseStream:
        """``fn(delta)`` for each output text delta."""
        self._handlers.on_text(fn)
        return self

    def on_tool_call(self, fn: Callable[[Any], Any]) -> AsyncResponseStream:
        """``fn(ToolCallUpdate)`` when a tool call starts, gets an arguments delta, and is done."""
        self._handlers.on_tool_call(fn)
        return self

    def on_refusal(self, fn: Callable[[str], Any]) -> AsyncResponseStream:
        self._handlers.on_refusal(fn)
        return self

    def on_routing(self, fn: Callable[[Any], Any]) -> AsyncResponseStream:
        """``fn(RoutingCompleted)``: the gateway picked a model for ``model: "auto"``."""
        self._handlers.on_routing(fn)
        return self

    def on_rewrite(self, fn: Callable[[Any], Any]) -> AsyncResponseStream:
        """``fn(RewriteInProgress)``: the text already streamed is about to be replaced by the ``*.done`` text."""
        self._handlers.on_rewrite(fn)
        return self

    def on_completed(self, fn: Callable[[AssembledResponse], Any]) -> AsyncResponseStream:
        self._handlers.on_completed(fn)
        return self

    def on_failed(self, fn: Callable[[RespstreamError], Any]) -> AsyncResponseStream:
        """``fn(error)`` with the exception :meth:`result` raises (failed, incomplete, error, cancelled, truncated)."""
        self._handlers.on_failed(fn)
        return self

    # --- consuming --------------------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._gen is None:
            self._gen = self._run()
        return self._gen

    async def until_done(self) -> AsyncResponseStream:
        """Consume the stream (running handlers) to its end. Raises like iteration."""
        async for _ in self:
            pass
        return self

    async def result(self) -> AssembledResponse:
        """Consume what is left and return the assembled response; raises like the sync twin's ``result()``."""
        if self._failure is None and not self._closed:
            try:
                await self.until_done()
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

    async def aclose(self) -> None:
        """Stop reading and release the connection. Idempotent."""
        self._closed = True
        self._opener = None
        if self._gen is not None:
            await self._gen.aclose()
        if self._response is not None:
            await self._response.aclose()

    async def __aenter__(self) -> AsyncResponseStream:
        return await self._ensure_open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- the loop ---------------------------------------------------------------------------------------------

    async def _run(self) -> AsyncGenerator[Event, None]:
        try:
            await self._ensure_open()
            async for event in self._loop():
                yield event
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                self._failure = exc if exc is not self._driver.error else None
            raise

    async def _dispatch(self, event: Event) -> None:
        for outcome in self._handlers.dispatch(event):
            if inspect.isawaitable(outcome):
                await outcome

    async def _loop(self) -> AsyncIterator[Event]:
        driver = self._driver
        while True:
            response = self._response
            if response is None or response.status_code == 204:
                if response is not None:
                    await response.aclose()
                step = driver.resume_not_needed()
            else:
                reader = _Reader()
                async for event in self._read(response, reader):
                    yield event
                step = reader.step
            while True:
                for event in step.events:
                    await self._dispatch(event)
                    yield event
                if step.action != "resume":
                    await self._finish(step)
                    return
                next_step = await self._reconnect(step)
                if next_step is None:
                    break  # connected: read the new body
                step = next_step

    async def _read(self, response: httpx.Response, reader: _Reader) -> AsyncIterator[Event]:
        driver = self._driver
        driver.connection_started(response.headers.get("content-type"), response.headers.get("x-response-id"))
        cause: BaseException | None = None
        timed_out = False
        try:
            async for chunk in response.aiter_bytes():
                for event in driver.feed(chunk):
                    await self._dispatch(event)
                    yield event
                if driver.stop_reading:
                    break
        except httpx.TimeoutException as exc:
            cause, timed_out = exc, True
        except httpx.TransportError as exc:  # read error, broken chunked body, connection reset
            cause = exc
        finally:
            await response.aclose()
        reader.step = driver.connection_ended(cause, timed_out=timed_out)

    async def _reconnect(self, step: Step) -> Step | None:
        """Wait, then GET the resume URL. ``None`` when a body streams; else the driver's next step."""
        driver, client = self._driver, self._client
        await client._sleep(step.delay)
        assert driver.response_id is not None  # the driver only resumes a known response
        url, params, headers = client.config.resume_request(driver.response_id, driver.cursor)
        try:
            self._response = await client._open("GET", url, params=params, headers=headers, retries=False)
        except RespstreamError as error:
            return driver.resume_failed(error, retryable=retryable_error(error))
        return None

    async def _finish(self, step: Step) -> None:
        result = self._driver.result_now()
        for outcome in self._handlers.finish(result, self._driver.error):
            if inspect.isawaitable(outcome):
                await outcome
        if step.action == "raise" and step.error is not None:
            raise step.error


class _Reader:
    """Carries the driver's verdict out of the ``_read`` async generator (which cannot return a value)."""

    step: Step
