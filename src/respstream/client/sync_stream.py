"""The blocking :class:`ResponseStream`: one streamed response, as :class:`~respstream.client.sync.Client` returns it.

A thin loop over :class:`~respstream.client.core.StreamDriver`; :mod:`respstream.client.async_stream` is its twin, with
the same methods in the same order. Only bytes move here; every decision is the driver's.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from types import TracebackType
from typing import Protocol

import httpx

from respstream.client._base import retryable_error
from respstream.client.core import ClientConfig, Step, StreamDriver
from respstream.client.handlers import Handlers
from respstream.client.stream_view import StreamView
from respstream.errors import RespstreamError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

__all__ = ["ResponseStream"]


class _Reconnector(Protocol):
    """The part of :class:`~respstream.client.sync.Client` a stream uses to resume. Described here, not imported:
    the client module imports this one, and an import back would be a circle."""

    config: ClientConfig
    _sleep: Callable[[float], None]

    def _open(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = ...,
        headers: dict[str, str] | None = ...,
        retries: bool = ...,
    ) -> httpx.Response: ...


class ResponseStream(StreamView):
    """One streamed response. Iterate it for typed events in sequence order, or register handlers and call
    :meth:`until_done`; :meth:`result` gives the assembled response.

    Iterating raises ``StreamTruncated`` (``StreamTimeout`` after an idle timeout) when a foreground stream drops,
    ``BadInputError`` when the body is not an event stream, and whatever a handler raises. A failed, incomplete,
    errored or cancelled response is not an iteration error: :meth:`result` raises for it.
    """

    def __init__(self, client: _Reconnector, driver: StreamDriver) -> None:
        self._client = client
        self._driver = driver
        self._handlers = Handlers()
        self._response: httpx.Response | None = None
        self._gen: Generator[Event, None, None] | None = None
        self._failure: BaseException | None = None
        self._closed = False

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
        return self._outcome()

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
