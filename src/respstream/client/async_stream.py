"""The asyncio/trio :class:`AsyncResponseStream`, as :class:`~respstream.client.async_.AsyncClient` returns it.

The twin of :mod:`respstream.client.sync_stream` (same methods, same order, same driver); only the waiting differs.
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
from typing import Any, Protocol

import httpx

from respstream.client._base import retryable_error
from respstream.client.core import ClientConfig, Step, StreamDriver
from respstream.client.handlers import Handlers
from respstream.client.stream_view import StreamView
from respstream.errors import RespstreamError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

__all__ = ["AsyncResponseStream"]


class _Reconnector(Protocol):
    """The part of :class:`~respstream.client.async_.AsyncClient` a stream uses to resume. Described here, not
    imported: the client module imports this one, and an import back would be a circle."""

    config: ClientConfig
    _sleep: Callable[[float], Awaitable[None]]

    async def _open(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = ...,
        headers: dict[str, str] | None = ...,
        retries: bool = ...,
    ) -> httpx.Response: ...


class AsyncResponseStream(StreamView):
    """One streamed response; the async twin of :class:`~respstream.client.sync_stream.ResponseStream`.

    ``async for`` gives typed events in sequence order; :meth:`result` gives the assembled response. Raises exactly
    what the sync twin raises, at the same points.
    """

    def __init__(
        self, client: _Reconnector, driver: StreamDriver, opener: Callable[[], Awaitable[httpx.Response]]
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
        return self._outcome()

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
