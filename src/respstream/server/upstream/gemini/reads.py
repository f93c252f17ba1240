"""The bytes of a ``streamGenerateContent?alt=sse`` body -> :class:`~.stream.GeminiStream` (sans-IO).

How this works: a read made only of whole ``data: {json}`` events in Gemini's CRLF framing (nearly every read: one
chunk a read) is split directly. A chunk that is only answer text (one candidate, bare text parts, no finish: the
bulk of a stream) is decoded into small typed structs that refuse anything else (every value decoded, none skipped:
the lane accepts exactly what the full path accepts; :meth:`~.stream.GeminiStream.feed_text`); any other chunk is
decoded as JSON and fed whole. Anything else (a read cut inside an event, LF or CR framing, comments, multi-line
data) goes through the protocol core's WHATWG SSE decoder, which keeps the unfinished event for the next read. The
state machine names what is wrong with an event.
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


class _TextPart(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    text: str


class _TextContent(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    parts: list[_TextPart]
    role: str = "model"


class _TextCandidate(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    content: _TextContent
    index: int = 0


class _TextChunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A chunk of answer text only; any other field (a finish, a thought, a call, an error) refuses it."""

    candidates: list[_TextCandidate]
    # Decoded, never skipped as msgspec.Raw: skipping a value checks neither its UTF-8 nor its numbers' range, and
    # this lane must refuse exactly what the full decoder refuses (tests/providers/gemini/test_lanes.py).
    usageMetadata: Any = None
    modelVersion: Any = None  # (named so the struct takes chunks that carry them; not used)
    responseId: Any = None


_text_chunk = msgspec.json.Decoder(_TextChunk).decode


def _feed_all(stream: GeminiStream, payloads: list[bytes]) -> list[Chunk]:
    """The chunks of a read's events, in order: runs of text-only chunks taken by the typed lane together (one
    :meth:`~.stream.GeminiStream.feed_text` for the run: a :class:`TextRun` for a read of many tokens), every other
    event decoded and fed whole."""
    out: list[Chunk] = []
    texts: list[str] = []
    usage: dict[str, Any] | None = None
    taken = 0
    for payload in payloads:
        if stream.text_lane:
            try:
                chunk = _text_chunk(payload)
            except (msgspec.DecodeError, msgspec.ValidationError):
                chunk = None
            if chunk is not None and len(chunk.candidates) == 1:
                for part in chunk.candidates[0].content.parts:
                    if part.text:
                        texts.append(part.text)
                if chunk.usageMetadata.__class__ is dict:  # (as feed: a usage that is no object is ignored)
                    usage = chunk.usageMetadata
                taken += 1
                continue
        if taken:
            out += stream.feed_text(texts, usage, taken)
            texts, usage, taken = [], None, 0
        out += stream.feed(_json(payload))
    if taken:
        out += stream.feed_text(texts, usage, taken)
    return out


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
            body = raw[6:-4]
            between = body.count(_BETWEEN)
            # (only the separators' CR and LF: no other line ends, so whole one-line events)
            if body.count(b"\n") == 2 * between and body.count(b"\r") == 2 * between:
                return _feed_all(stream, body.split(_BETWEEN) if between else [body])
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
        return _feed_all(self.stream, [message.data for message in self._decoder.events()])
