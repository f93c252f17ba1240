"""One response's log on the socket: the SSE sender's log follower writing WebSocket text messages.

:class:`WebSocketTurnSender` is ``sse_response.EventStreamResponse`` (cursor over the store, the keep-alive and
slow-reader timer, the reader's own terminal) with the wire encoding swapped: one text message per event, the
event's JSON exactly as the dialect wrote it for SSE. On a named lane (``stream_id``) every message carries the
lane's ``stream_id`` too: :func:`with_stream_id` adds it to the event's JSON object as its first member.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from respstream.server.events.frames import reader_terminal_data
from respstream.server.http.sse_response import COALESCE_BYTES, EventStreamResponse
from respstream.server.store.base import Entry
from respstream.server.websocket.frame_writer import FrameWriter

__all__ = ["WebSocketTurnSender", "lane_prefix", "with_stream_id"]


def lane_prefix(stream_id: str | None) -> bytes | None:
    """What starts every event of lane ``stream_id``: ``{"stream_id":"...",`` (None for the default lane)."""
    if stream_id is None:
        return None
    return b'{"stream_id":' + msgspec.json.encode(stream_id) + b","


def with_stream_id(data: bytes, prefix: bytes | None) -> bytes:
    """``data`` (one event: a JSON object, never empty) with the lane's ``stream_id`` as its first member."""
    if prefix is None:
        return data
    return prefix + data[1:]


class WebSocketTurnSender(EventStreamResponse):
    """The SSE sender's log follower, writing WebSocket text messages instead of SSE frames. ``writer``: the
    connection's :class:`FrameWriter` (None: every message through ``send``), which writes the entries of one read
    of the log together while the connection takes writes at once. ``prefix``: the lane's (:func:`lane_prefix`)."""

    writer: FrameWriter | None = None
    prefix: bytes | None = None

    async def _send_entries(self, send: Any, entries: list[Entry]) -> bool:
        if self.writer is not None:
            done = self.writer.write(entries, COALESCE_BYTES, self.prefix)
            if done:
                self.last = entries[done - 1].sequence_number
                if done == len(entries):
                    return entries[-1].terminal
                entries = entries[done:]
        return await super()._send_entries(send, entries)

    def abort_connection(self, send: Any) -> bool:
        # ``send`` is Starlette's WebSocket.send, which holds no transport: the writer's connection does.
        if self.writer is not None:
            self.writer.abort()
            return True
        return super().abort_connection(send)

    def entry_message(self, entry: Entry) -> dict[str, Any]:
        return {"type": "websocket.send", "text": with_stream_id(entry.data, self.prefix).decode()}

    def keepalive_message(self) -> dict[str, Any] | None:
        return None  # the server pings (uvicorn's ws_ping_interval); an idle socket needs no comment frames

    def terminal_message(self, sequence_number: int, code: str, message: str) -> dict[str, Any]:
        data = reader_terminal_data(self.dialect, sequence_number, code, message)
        return {"type": "websocket.send", "text": with_stream_id(data, self.prefix).decode()}

    def close_message(self) -> dict[str, Any]:
        return {"type": "websocket.close", "code": 1008, "reason": "slow reader"}

    async def send_log(self, send: Callable[[dict[str, Any]], Any], limit: float) -> bool:
        """Send the log to its terminal. False when this reader was cut for not reading (the socket is closed)."""
        me = asyncio.current_task()
        self.arm_timer(limit)
        try:
            await self._follow(send)
            return True
        except asyncio.CancelledError:
            if not self.cut_slow or self.disconnected:
                raise
            if me is not None:
                me.uncancel()
            self.disarm_timer()
            await self._cut(send, limit)
            return False
        finally:
            self.disarm_timer()
