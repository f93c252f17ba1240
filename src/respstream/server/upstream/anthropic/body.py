"""The bytes of an Anthropic Messages stream -> :class:`~.stream.AnthropicStream` events, without IO: SSE decoded by
the protocol core's decoder (any chunking, CRLF, split UTF-8), each ``data`` read as JSON.

The text lane: nearly every read of a live stream is one or more whole ``content_block_delta`` events carrying a
``text_delta`` (``event: content_block_delta`` then one ``data:`` line, LF framing). Such a read, starting where the
decoder holds nothing, is taken without the general decoder: each payload decoded into a small typed struct and the
text given to the open text block. Anything else (another event, CR, a partial event) goes the general way.
"""

from __future__ import annotations

from typing import Final

import msgspec

from respstream.errors import BadInputError
from respstream.protocol.sse import SSEDecoder
from respstream.server.upstream.anthropic.stream import AnthropicStream
from respstream.server.upstream.base import Chunk, TextDelta, TextRun, UpstreamError

__all__ = ["AnthropicBody"]

_decode = msgspec.json.Decoder().decode
_DELTA_HEAD: Final = b"event: content_block_delta\ndata: "
_SPLIT: Final = b"\n\n" + _DELTA_HEAD


class _Delta(msgspec.Struct, gc=False):
    type: str = ""
    text: str | None = None


class _DeltaEvent(msgspec.Struct, gc=False):
    type: str = ""
    index: int = -1
    delta: _Delta | None = None


_decode_delta = msgspec.json.Decoder(_DeltaEvent).decode
_decode_deltas = msgspec.json.Decoder(list[_DeltaEvent]).decode


class AnthropicBody:
    """:meth:`feed` each read, :meth:`end` at EOF; the chunks come back. ``stream`` holds the state (``done``,
    ``failure``, ``streamed``)."""

    def __init__(self, stream: AnthropicStream, *, max_event_size: int = 16 << 20) -> None:
        self.stream = stream
        self._sse = SSEDecoder(max_event_size=max_event_size)
        self._count = 0
        self._at_boundary = True  # the decoder holds nothing (what it was given ended at an event's end)
        self._skipped = 0  # bytes taken by the text lane (the decoder's offsets do not count them)
        self._lane_events = 0  # events in the read the text lane last looked at

    def feed(self, raw: bytes) -> list[Chunk]:
        if self._at_boundary and raw.startswith(_DELTA_HEAD) and raw.endswith(b"\n\n"):
            texts = self._text_lane(raw)
            if texts is not None:
                self._skipped += len(raw)
                self._count += self._lane_events
                self.stream.events_seen += self._lane_events
                if not texts:
                    return []
                self.stream.streamed = True
                return [TextDelta(texts[0])] if len(texts) == 1 else [TextRun(texts)]
        self._at_boundary = raw.endswith(b"\n\n")
        try:
            self._sse.feed(raw)
        except BadInputError as exc:
            self._bad(f"not an event stream: {exc}")
            return []
        return self._events()

    def _text_lane(self, raw: bytes) -> list[str] | None:
        """The texts of a read made only of whole text-delta events of the open text block, else ``None``."""
        stream = self.stream
        if stream.done or stream.failure is not None or b"\r" in raw:
            return None
        payloads = raw[len(_DELTA_HEAD):-2].split(_SPLIT)
        self._lane_events = len(payloads)
        if raw.count(b"\n") != 3 * len(payloads):
            return None  # (a comment, another field, multi-line data: the decoder reads it)
        try:  # (several events: one decode of them as a JSON array)
            events = [_decode_delta(payloads[0])] if len(payloads) == 1 else _decode_deltas(
                b"[" + b",".join(payloads) + b"]")
        except msgspec.DecodeError:
            return None
        if len(events) != len(payloads):
            return None  # (a data line holding more than one JSON value: the decoder refuses it)
        texts: list[str] = []
        append = texts.append
        open_index = -1
        for event in events:
            delta = event.delta
            if event.type != "content_block_delta" or delta is None or delta.type != "text_delta":
                return None
            if event.index != open_index:
                if not stream.text_block(event.index):
                    return None
                open_index = event.index
            if delta.text:
                append(delta.text)
        return texts

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
                self._bad(f"event {self._count} (byte {message.offset + self._skipped}) is not JSON")
                break
            out += stream.event(data)
        return out

    def _bad(self, why: str) -> None:
        if self.stream.failure is None:
            self.stream.failure = UpstreamError("upstream_error", f"{self.stream.name}: {why}",
                                                before_first_token=not self.stream.streamed)
