"""The bytes of an Anthropic Messages stream -> :class:`~.stream.AnthropicStream` events, without IO: SSE decoded by
the protocol core's decoder (any chunking, CRLF, split UTF-8), each ``data`` read as JSON."""

from __future__ import annotations

import msgspec

from respstream.errors import BadInputError
from respstream.protocol.sse import SSEDecoder
from respstream.server.upstream.anthropic.stream import AnthropicStream
from respstream.server.upstream.base import Chunk, UpstreamError

__all__ = ["AnthropicBody"]

_decode = msgspec.json.Decoder().decode


class AnthropicBody:
    """:meth:`feed` each read, :meth:`end` at EOF; the chunks come back. ``stream`` holds the state (``done``,
    ``failure``, ``streamed``, ``history``)."""

    def __init__(self, stream: AnthropicStream, *, max_event_size: int = 16 << 20) -> None:
        self.stream = stream
        self._sse = SSEDecoder(max_event_size=max_event_size)
        self._count = 0

    def feed(self, raw: bytes) -> list[Chunk]:
        try:
            self._sse.feed(raw)
        except BadInputError as exc:
            self._bad(f"not an event stream: {exc}")
            return []
        return self._events()

    def end(self) -> list[Chunk]:
        """EOF. A last event whose blank line (or line end) never came is still read: the API's own recordings end
        ``message_stop`` that way; a block cut inside its JSON then fails as not JSON, never as a clean end."""
        try:
            self._sse.feed(b"\n\n")
            self._sse.close()
        except BadInputError as exc:
            self._bad(f"not an event stream: {exc}")
        out = self._events()
        return out + self.stream.end()

    def _events(self) -> list[Chunk]:
        out: list[Chunk] = []
        stream = self.stream
        for message in self._sse.events():
            self._count += 1
            if stream.done or stream.failure is not None:
                break
            try:
                data = _decode(message.data)
            except msgspec.DecodeError:
                self._bad(f"event {self._count} (byte {message.offset}) is not JSON")
                break
            out += stream.event(data)
        return out

    def _bad(self, why: str) -> None:
        if self.stream.failure is None:
            self.stream.failure = UpstreamError("upstream_error", f"{self.stream.name}: {why}",
                                                before_first_token=not self.stream.streamed)
