"""Progress events while a response is quiet: a real protocol event, not only an SSE comment.

Why: a client's stream idle timer may count events, not bytes. Codex CLI gives up after 300 s without an event, and
a small CPU model can take longer than that to read a long prompt before its first token; the ``: keep-alive``
comments (sse_response.py) do not reset that timer. So a response that has emitted nothing for
``progress_event_seconds`` gets a ``keepalive`` event — the one OpenAI itself sends on long streams
(``{"type": "keepalive", "sequence_number": N}``; every SDK lets it pass). In Open Responses it is the extension
event ``respstream:keepalive`` (the spec allows a prefixed one; clients MUST ignore what they do not know), and only
after 240 s of quiet (``Dialect.keepalive_after_seconds``): spec-typed clients such as the public compliance suite
refuse an unknown event type, and none of them waits that long, while Codex CLI gives up at 300 s. It takes a
sequence number like any event.

How: one ``call_later`` timer a response (no task while it is busy); a tick that finds the sequence number where the
last one left it emits the event and flushes it. Only with a store whose append never suspends (memory, the
foreground default): then that flush, run while the pipeline waits in an await, cannot interleave with a write of
its own. SQLite/Redis responses rely on the comments (they are background or shared ones, which readers resume
rather than time out).
"""

from __future__ import annotations

import asyncio
import contextlib

from respstream.server.events.writer import ResponseWriter

__all__ = ["start_progress_events"]


class _Progress:
    """A timer (no task while the response is busy): every ``interval`` it looks whether anything was emitted."""

    __slots__ = ("_handle", "_interval", "_loop", "_seen", "_writer")

    def __init__(self, writer: ResponseWriter, interval: float) -> None:
        self._writer = writer
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._seen = writer.next_sequence_number
        self._handle = self._loop.call_later(interval, self._tick)

    def _tick(self) -> None:
        writer = self._writer
        if writer.closed:
            return
        if writer.next_sequence_number == self._seen:  # nothing for a whole interval
            writer.emit_event(writer.dialect.keepalive_event or "keepalive", {})
            # The memory store's flush never suspends: it is done within this step of the new task.
            self._loop.create_task(_flush(writer), name="progress event")
        self._seen = writer.next_sequence_number
        self._handle = self._loop.call_later(self._interval, self._tick)

    def cancel(self) -> None:
        self._handle.cancel()


async def _flush(writer: ResponseWriter) -> None:
    with contextlib.suppress(Exception):  # the pipeline's own flush reports a failing store
        await writer.flush()


def start_progress_events(writer: ResponseWriter, interval: float) -> _Progress | None:
    """A timer emitting ``keepalive`` events while ``writer``'s response is quiet; ``cancel()`` it when the response
    ends. ``None`` when off (``interval`` <= 0) or the store's writes may suspend."""
    if interval <= 0 or writer.needs_flush_await or writer.dialect.keepalive_event is None:
        return None
    return _Progress(writer, max(interval, writer.dialect.keepalive_after_seconds))
