"""The bytes of a ``streamGenerateContent?alt=sse`` body -> :class:`~.stream.GeminiStream` (sans-IO).

How this works: a read made only of whole ``data: {json}`` events in Gemini's CRLF framing (nearly every read: one
chunk a read) is split directly. A chunk that is only answer text (one candidate, bare text parts, no finish: the
bulk of a stream) is decoded into small typed structs that refuse anything else, its usage kept undecoded until the
end (:meth:`~.stream.GeminiStream.feed_text`); any other chunk is decoded as JSON and fed whole. Anything else (a
read cut inside an event, LF or CR framing, comments, multi-line data) goes through the protocol core's WHATWG SSE
decoder, which keeps the unfinished event for the next read. The state machine names what is wrong with an event.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from respstream.protocol.sse import SSEDecodeError, SSEDecoder
from respstream.server.upstream.base import Chunk
from respstream.server.upstream.gemini.stream import GeminiStream

__all__ = ["GeminiBody"]

_EVENT_END: Final = b"\r\n\r\n"
_BETWEEN: Final = b"\r\n\r\ndata: "
_decode = msgspec.json.decode


_NO_USAGE: Final = msgspec.Raw(b"")


class _TextPart(msgspec.Struct, forbid_unknown_fields=True):
    text: str


class _TextContent(msgspec.Struct, forbid_unknown_fields=True):
    parts: list[_TextPart]
    role: str = "model"


class _TextCandidate(msgspec.Struct, forbid_unknown_fields=True):
    content: _TextContent
    index: int = 0


class _TextChunk(msgspec.Struct, forbid_unknown_fields=True):
    """A chunk of answer text only; any other field (a finish, a thought, a call, an error) refuses it."""

    candidates: list[_TextCandidate]
    usageMetadata: msgspec.Raw = _NO_USAGE
    modelVersion: str | None = None  # (named so the struct takes chunks that carry them; not used)
    responseId: str | None = None


_text_chunk = msgspec.json.Decoder(_TextChunk).decode


def _feed(stream: GeminiStream, data: bytes) -> list[Chunk]:
    if stream.text_lane:
        try:
            chunk = _text_chunk(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
        else:
            if len(chunk.candidates) == 1:
                usage = chunk.usageMetadata
                return stream.feed_text([p.text for p in chunk.candidates[0].content.parts], usage or None)
    return stream.feed(_json(data))


def _json(data: bytes) -> Any:
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return None  # (the state machine says: "event N is not a JSON object")


class GeminiBody:
    """Feed the body's reads; get chunks (then check ``stream.failure``); :meth:`finish` at its end."""

    __slots__ = ("_boundary", "_decoder", "stream")

    def __init__(self, stream: GeminiStream) -> None:
        self.stream = stream
        self._decoder = SSEDecoder()
        self._boundary = True  # the decoder holds no unfinished event

    def feed(self, raw: bytes) -> list[Chunk]:
        stream = self.stream
        if self._boundary and raw.startswith(b"data: ") and raw.endswith(_EVENT_END):
            payloads = raw[6:-4].split(_BETWEEN)
            joined = b"".join(payloads) if len(payloads) > 1 else payloads[0]
            if b"\n" not in joined and b"\r" not in joined:
                if len(payloads) == 1:
                    return _feed(stream, joined)
                out: list[Chunk] = []
                for payload in payloads:
                    out += _feed(stream, payload)
                return out
        try:
            self._decoder.feed(raw)
        except SSEDecodeError as exc:
            stream.fail_input(f"the body is not an event stream: {exc}")
            return []
        self._boundary = raw.endswith((_EVENT_END, b"\n\n"))
        return self._events()

    def finish(self) -> list[Chunk]:
        """The end of the body: its last events, then the state machine's end (a cut stream fails)."""
        self._decoder.close()
        return self._events() + self.stream.finish()

    def _events(self) -> list[Chunk]:
        out: list[Chunk] = []
        stream = self.stream
        for message in self._decoder.events():
            out += _feed(stream, message.data)
        return out
