"""Several WebSocket text messages in one socket write: the WebSocket twin of the SSE sender's coalesced sends.

Why: through ASGI every event is one ``websocket.send``, and uvicorn's websockets-sansio protocol frames it and
writes it to the transport on its own, one system call an event. A turn of 400 deltas made 400 writes (SSE makes
~8), and WebSocket mode cost 2.4-2.7x SSE's server CPU per event (docs/benchmarks.md, WebSocket mode vs SSE). Here
the events one read of the log made ready are framed by the same protocol object (``conn.send_text``: the same
frames, the same per-message-deflate context, in order) and written together, up to ``COALESCE_BYTES`` a write.

Only uvicorn's websockets-sansio ``send`` is written to this way (:meth:`FrameWriter.for_send`), and only while it
would itself write at once: handshake done, connection open, nothing closing, writing not paused. Whenever that does
not hold, :meth:`FrameWriter.write` writes nothing more and the sender sends the rest through ``send``, which waits
for the transport, raises for a peer that went away, and runs under the slow-reader timer, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from websockets.protocol import State

from respstream.server.store.base import Entry

__all__ = ["FrameWriter"]

_PROTOCOL_MODULE = "uvicorn.protocols.websockets.websockets_sansio_impl"
_NEEDS = ("conn", "transport", "writable", "disconnected", "close_sent", "handshake_complete", "initial_response")


class FrameWriter:
    """Writes text messages straight through one uvicorn websockets-sansio connection."""

    __slots__ = ("_proto",)

    def __init__(self, proto: Any) -> None:
        self._proto = proto

    @classmethod
    def for_send(cls, send: Any) -> FrameWriter | None:
        """A writer for the connection behind uvicorn's websockets-sansio ``send``; None for any other ``send``."""
        owner = getattr(send, "__self__", None)
        if owner is None or type(owner).__module__ != _PROTOCOL_MODULE or not all(hasattr(owner, a) for a in _NEEDS):
            return None
        return cls(owner)

    def abort(self) -> None:
        """Drop the connection and what it buffers (a reader that would not read)."""
        self._proto.transport.abort()

    def _open(self) -> bool:
        p = self._proto
        return (p.handshake_complete and p.initial_response is None and not p.disconnected and not p.close_sent
                and p.writable.is_set() and p.conn.state is State.OPEN and not p.transport.is_closing())

    def write(self, entries: Sequence[Entry], max_bytes: int, prefix: bytes | None = None) -> int:
        """Frame and write ``entries``' data, in order, ``max_bytes`` or so a write, while the connection takes writes
        at once. Returns how many were written (0: none; the caller sends those left through ``send``). ``prefix``:
        a named lane's ``{"stream_id":...,`` (sender.py), put in place of each event's opening brace."""
        p = self._proto
        conn = p.conn
        # No extension (no per-message deflate) and no fragmented message open: a text frame is a fixed header and
        # the payload, built here (what websockets' Frame.serialize makes for an unmasked server frame, without its
        # per-frame objects); otherwise the protocol frames them. Bytes it holds already go out first, in order.
        raw = not conn.extensions and not conn.expect_continuation_frame
        written = framed = size = 0
        chunks: list[bytes] = []
        for i, entry in enumerate(entries):
            if size == 0 and not self._open():  # checked again after each write: it may have paused writing
                break
            data = entry.data if prefix is None else prefix + entry.data[1:]
            if raw:
                chunks.append(_text_frame_header(len(data)))
                chunks.append(data)
            else:
                conn.send_text(data)
            size += len(data)
            framed = i + 1
            if size >= max_bytes:
                self._flush(chunks)
                chunks = []
                written, size = framed, 0
        if framed > written:
            self._flush(chunks)
            written = framed
        return written

    def _flush(self, frames: list[bytes]) -> None:
        p = self._proto
        pending = p.conn.data_to_send()  # what the protocol framed (ours without raw frames; a pong...) goes first
        p.transport.write(b"".join(pending + frames) if pending else b"".join(frames))


def _text_frame_header(size: int) -> bytes:
    """RFC 6455 section 5.2: FIN + text opcode, then the payload length (7 bits, or 126 + 16 bits, or 127 + 64 bits);
    a server's frames are not masked."""
    if size < 126:
        return bytes((0x81, size))
    if size < 1 << 16:
        return b"\x81\x7e" + size.to_bytes(2, "big")
    return b"\x81\x7f" + size.to_bytes(8, "big")
