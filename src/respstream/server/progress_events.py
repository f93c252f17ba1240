"""Progress events while a response is quiet: a real protocol event, not only an SSE comment.

Why: a client's stream idle timer may count events, not bytes. Codex CLI gives up after 300 s without an event, and
a small CPU model can take longer than that to read a long prompt before its first token; the ``: keep-alive``
comments (sse_response.py) do not reset that timer. So a response that has emitted nothing for
``progress_event_seconds`` gets a ``keepalive`` event — the one OpenAI itself sends on long streams
(``{"type": "keepalive", "sequence_number": N}``; every SDK lets it pass) — named ``respstream:keepalive`` in Open
Responses, where a non-spec event carries the implementor prefix. It takes a sequence number like any event.

Only with a store whose append never suspends (memory, the foreground default): then emitting and flushing here,
while the pipeline is suspended in an await, cannot interleave with a write of its own. SQLite/Redis responses rely on
the comments (they are background or shared ones, which readers resume rather than time out).
"""

from __future__ import annotations

import asyncio
import contextlib

from respstream.server.writer import ResponseWriter

__all__ = ["start_progress_events"]


async def _beat(writer: ResponseWriter, interval: float) -> None:
    seen = writer.next_sequence_number
    while True:
        await asyncio.sleep(interval)
        if writer.closed:
            return
        if writer.next_sequence_number == seen:  # nothing for a whole interval
            writer.emit_event(writer.dialect.keepalive_event, {})
            with contextlib.suppress(Exception):  # the pipeline's own flush reports a failing store
                await writer.flush()
        seen = writer.next_sequence_number


def start_progress_events(writer: ResponseWriter, interval: float) -> asyncio.Task[None] | None:
    """A task emitting ``keepalive`` events while ``writer``'s response is quiet; cancel it when the response ends.
    ``None`` when off (``interval`` <= 0) or the store's writes may suspend."""
    if interval <= 0 or writer.needs_flush_await:
        return None
    return asyncio.create_task(_beat(writer, interval), name="progress events")
