"""The shared brain of ``ResponseStream`` and ``AsyncResponseStream``: everything but the IO.

How this works: a :class:`StreamDriver` owns one :class:`~respstream.protocol.stream.StreamCore` for the whole life
of a response, across every connection. The sync and async twins only move bytes: they call
``connection_started()``, ``feed(chunk)`` for each chunk (getting events in sequence order; the shells run the
handlers as they yield each one)
and ``connection_ended(cause)`` at EOF or on a read error. The driver answers with a :class:`Step`:

* ``done``: a terminal was delivered (or the server said ``204``): finish and report the outcome;
* ``resume``: a background response dropped: wait ``delay`` and ``GET …?starting_after=<cursor>``; the next
  connection's bytes go into the *same* sequencer and assembler through a fresh SSE decoder, so an event the server
  repeats is dropped and a missing one is reported, never silently skipped;
* ``raise``: a foreground stream dropped (or resuming gave up): yield the flushed events, then raise
  :class:`~respstream.errors.StreamTruncated` (``StreamTimeout`` after an idle-read timeout). Never a re-POST.

``cursor`` is the highest contiguous sequence number delivered: the sequencer only releases in order, so it is the
number of the last released event.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from respstream.client.retry import RetryPolicy
from respstream.errors import (
    BadInputError,
    ResponseCancelled,
    ResponseFailed,
    ResponseIncomplete,
    RespstreamError,
    StreamError,
    StreamTimeout,
    StreamTruncated,
)
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event, ResponseEvent
from respstream.protocol.stream import StreamCore

__all__ = [
    "DEFAULT_BASE_URL",
    "ClientConfig",
    "Step",
    "StreamDriver",
    "outcome_error",
    "resolve_api_key",
    "resolve_base_url",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolve_base_url(base_url: str | None) -> str:
    """``base_url``, else ``RESPSTREAM_BASE_URL``, else ``OPENAI_BASE_URL``, else OpenAI's; no trailing slash."""
    url = base_url or os.environ.get("RESPSTREAM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return url.rstrip("/")


def resolve_api_key(api_key: str | None) -> str | None:
    """``api_key``, else ``RESPSTREAM_API_KEY``, else ``OPENAI_API_KEY``, else ``None`` (no Authorization header)."""
    return api_key or os.environ.get("RESPSTREAM_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


@dataclass
class ClientConfig:
    """Settings shared by :class:`~respstream.client.Client` and :class:`~respstream.client.AsyncClient`."""

    base_url: str
    api_key: str | None
    timeout: float = 60.0  # connect/write, and the whole read of a non-streaming call
    idle_timeout: float = 60.0  # longest silence inside a stream (keep-alive comments count as activity)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    window: int = 64
    max_event_size: int = 16 << 20
    headers: dict[str, str] = field(default_factory=dict)

    def request_headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"accept": "text/event-stream" if stream else "application/json", **self.headers}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def resume_request(
        self, response_id: str, starting_after: int | None
    ) -> tuple[str, dict[str, str], dict[str, str]]:
        """(url, query params, headers) of ``GET /responses/{id}?stream=true&starting_after=N``."""
        params = {"stream": "true"}
        headers = self.request_headers(stream=True)
        if starting_after is not None:
            params["starting_after"] = str(starting_after)
            headers["last-event-id"] = str(starting_after)
        return self.url(f"responses/{response_id}"), params, headers


@dataclass
class Step:
    """What the IO shell does next. ``events`` are delivered before acting on ``action``."""

    action: Literal["done", "resume", "raise"]
    events: list[Event] = field(default_factory=list)
    delay: float = 0.0
    error: RespstreamError | None = None


def outcome_error(result: AssembledResponse) -> RespstreamError | None:
    """The exception ``result()`` raises for a non-completed outcome; ``None`` when it completed."""
    status = result.status
    if status == "completed":
        return None
    err = result.error or {}
    detail = ": ".join(str(x) for x in (err.get("code"), err.get("message")) if x)
    suffix = f" ({detail})" if detail else ""
    rid = f"response {result.response_id}" if result.response_id else "response"
    if status == "incomplete":
        reason = (result.incomplete_details or {}).get("reason")
        return ResponseIncomplete(f"{rid} is incomplete" + (f" ({reason})" if reason else ""), response=result)
    if status == "failed":
        return ResponseFailed(f"{rid} failed{suffix}", response=result)
    if status == "cancelled":
        return ResponseCancelled(f"{rid} was cancelled", response=result)
    if status == "error":
        code = err.get("code")
        return StreamError(f"{rid} ended with an error{suffix}", error_code=None if code is None else str(code),
                           response=result)
    return StreamTruncated(
        f"{rid}: the stream ended without a terminal event (last sequence number "
        f"{result.last_sequence_number})",
        partial=result,
        last_sequence_number=result.last_sequence_number,
    )


class StreamDriver:
    """Sequencing, assembly, handlers and the resume decision for one response, independent of IO.

    ``resumable``: True for ``background: true`` requests and for streams opened by ``resume()``.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        resumable: bool,
        response_id: str | None = None,
        starting_after: int | None = None,
    ) -> None:
        self.config = config
        self.resumable = resumable
        self.response_id = response_id
        self.core = StreamCore(starting_after=starting_after, window=config.window,
                               max_event_size=config.max_event_size)
        self.cursor: int | None = starting_after
        self.terminal_seen = False  # a terminal event (or a 204 from the resume endpoint) was delivered
        self.stop_reading = False  # a response.* terminal was delivered: nothing more is worth reading
        self.connections = 0
        self.resumes = 0
        self._stalled_attempts = 0  # reconnects in a row that delivered nothing new
        self._delivered_this_connection = 0
        self._finished = False
        self._result: AssembledResponse | None = None
        self._error: RespstreamError | None = None
        self._non_sse_body = False  # some body was not declared text/event-stream

    # --- per connection ---------------------------------------------------------------------------------------

    def connection_started(self, content_type: str | None = None, response_id: str | None = None) -> None:
        """A new body begins: later bytes go through a fresh SSE decoder into the same sequencer and assembler.

        ``response_id`` is the ``x-response-id`` header when the server sends one: with it, a background stream
        cut before its ``response.created`` arrived can still be resumed.
        """
        if self.response_id is None and response_id:
            self.response_id = response_id
        if self.connections:
            # The dropped body's unterminated block must not be glued to the next body's first line.
            self.core.reconnect()
        self.connections += 1
        self._delivered_this_connection = 0
        if content_type is not None and "event-stream" not in content_type.lower():
            self._non_sse_body = True

    def feed(self, chunk: bytes) -> list[Event]:
        """Bytes of the current body -> events released in sequence order.

        Raises ``BadInputError`` when the body is not an event stream.
        """
        self.core.feed(chunk)
        events = self.core.events()
        if events:
            self._track(events)
        return events

    def _track(self, events: list[Event]) -> None:
        # Per batch, not per event: the core already knows the last number and whether a terminal came.
        self._delivered_this_connection += len(events)
        core = self.core
        last = core.last_sequence_number
        if last is not None:
            self.cursor = last
        if not self.stop_reading and core.terminal:
            self.terminal_seen = True
            # An `error` may still be followed by its `response.failed`: keep reading until EOF then.
            self.stop_reading = core.assembler.terminal != "error" or events[-1].type == "response.failed"
        if self.response_id is None:
            for event in events:
                if isinstance(event, ResponseEvent) and event.response:
                    rid = event.response.get("id")
                    if isinstance(rid, str) and rid:
                        self.response_id = rid
                        break

    def connection_ended(self, cause: BaseException | None = None, *, timed_out: bool = False) -> Step:
        """The current body ended: cleanly (``cause`` None), by a read error, or by the idle timeout."""
        if self._delivered_this_connection:
            self._stalled_attempts = 0
        if self.terminal_seen:
            return Step("done", self.finish())
        if self.resumable and self.response_id is not None:
            if self._stalled_attempts < self.config.retry.max_resume_attempts:
                delay = self.config.retry.delay(self._stalled_attempts)
                self._stalled_attempts += 1
                self.resumes += 1
                return Step("resume", delay=delay)
            why = f"gave up resuming after {self._stalled_attempts} attempts without progress"
        elif self.resumable:
            why = "the connection dropped before the response id was known, so it cannot be resumed"
        else:
            why = "the connection dropped and a foreground response cannot be resumed"
        return self._truncated(why, cause, timed_out=timed_out)

    def resume_failed(self, error: RespstreamError, *, retryable: bool) -> Step:
        """A resume request failed before streaming (status error or no connection)."""
        if retryable and self._stalled_attempts < self.config.retry.max_resume_attempts:
            retry_after = getattr(error, "retry_after", None)
            delay = self.config.retry.delay_for(self._stalled_attempts, retry_after)
            if delay is not None:
                self._stalled_attempts += 1
                self.resumes += 1
                return Step("resume", delay=delay)
        return self._truncated(f"resuming failed: {error}", error)

    def resume_not_needed(self) -> Step:
        """The resume endpoint answered ``204``: the server has nothing after our cursor; end cleanly."""
        self.terminal_seen = True
        return Step("done", self.finish())

    def _truncated(self, why: str, cause: BaseException | None, *, timed_out: bool = False) -> Step:
        events = self.finish()
        result = self.result_now()
        cls = StreamTimeout if timed_out else StreamTruncated
        reason = f"no data for {self.config.idle_timeout:g}s" if timed_out else why
        if timed_out and self.resumable:
            reason += f"; {why}"
        rid = f"response {result.response_id}" if result.response_id else "response"
        error = cls(
            f"{rid} stream truncated after sequence number {result.last_sequence_number}: {reason}",
            partial=result,
            last_sequence_number=result.last_sequence_number,
        )
        if cause is not None:
            error.__cause__ = cause
        self._error = error
        return Step("raise", events, error=error)

    # --- the end ----------------------------------------------------------------------------------------------

    def finish(self) -> list[Event]:
        """EOF of the whole response: flush the sequencer; the outcome is now final. Idempotent."""
        if self._finished:
            return []
        self._finished = True
        try:
            self.core.close()
        except BadInputError:
            # No JSON event at all. On an event-stream body that is a stream cut before its first event (a
            # truncation); on anything else (a JSON or text page served with 200) it is bad input.
            if self._non_sse_body or self.core.messages:
                raise
        events = self.core.events()
        if events:
            self._track(events)
        result = self.result_now()
        if self._error is None:
            self._error = outcome_error(result)
        return events

    def result_now(self) -> AssembledResponse:
        if self._finished and self._result is not None:
            return self._result
        result = self.core.result
        if self._finished:
            self._result = result
        return result

    def outcome(self) -> AssembledResponse:
        """The assembled response, or raise the outcome's exception (after :meth:`finish`)."""
        result = self.result_now()
        if self._error is not None:
            raise self._error
        return result

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def error(self) -> RespstreamError | None:
        """The outcome's exception once finished (``None`` for a completed response or while streaming)."""
        return self._error
