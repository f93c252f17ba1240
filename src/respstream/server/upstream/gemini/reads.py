"""The bytes of a ``streamGenerateContent?alt=sse`` body -> :class:`~.stream.GeminiStream` (sans-IO).

How this works: a read made only of whole ``data: {json}`` events in Gemini's CRLF framing (nearly every read: one
chunk a read) is split directly. A chunk that is only answer text (one candidate, bare text parts, no finish: the
bulk of a stream) is decoded into small typed structs that refuse anything else (gemini/text_chunk.py: every value
decoded, none skipped: the lane accepts exactly what the full path accepts; :meth:`~.stream.GeminiStream.feed_text`);
any other chunk is decoded as JSON and fed whole. Once such a text chunk has been read, it is learned as a template
(gemini/text_template.py): a read of several text chunks (a gateway busier than its upstream reads many at once) is
then checked against it and only its texts and last usage decoded. Anything else (a read cut inside an event, LF or
CR framing, comments, multi-line data) goes through the protocol core's WHATWG SSE decoder, which keeps the
unfinished event for the next read. The state machine names what is wrong with an event.
"""

from __future__ import annotations

import sys
from typing import Any, Final

import msgspec

from respstream.protocol.sse import SSEDecodeError, SSEDecoder
from respstream.server.upstream.base import Chunk
from respstream.server.upstream.gemini.stream import GeminiStream
from respstream.server.upstream.gemini.text_chunk import UsageCounts, decode_text_chunk
from respstream.server.upstream.gemini.text_template import GeminiTemplate, learn_template

__all__ = ["GeminiBody"]

_EVENT_END: Final = b"\r\n\r\n"
_BETWEEN: Final = b"\r\n\r\ndata: "
_decode = msgspec.json.decode
_MAX_LEARNS: Final = 8  # tries at learning a template, a stream (each decodes one event: bounded work)
_NEVER: Final = sys.maxsize
_MAX_MISSES: Final = 3  # reads in a row a template does not take before it is dropped (a finish, a thought...)


def _feed_all(stream: GeminiStream, payloads: list[bytes]) -> list[Chunk]:
    """The chunks of a read's events, in order: runs of text-only chunks taken by the typed lane together (one
    :meth:`~.stream.GeminiStream.feed_text` for the run: a :class:`TextRun` for a read of many tokens), every other
    event decoded and fed whole."""
    out: list[Chunk] = []
    texts: list[str] = []
    usage: UsageCounts | None = None
    taken = 0
    for payload in payloads:
        if stream.text_lane:
            try:
                chunk = decode_text_chunk(payload)
            except (msgspec.DecodeError, msgspec.ValidationError):
                chunk = None
            if chunk is not None and len(chunk.candidates) == 1:
                for part in chunk.candidates[0].content.parts:
                    if part.text:
                        texts.append(part.text)
                if chunk.usageMetadata is not None:  # (as feed: a null usage is ignored)
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


def _no_template(raw: bytes) -> tuple[list[str], bytes, int] | None:
    return None  # (a GeminiBody without a template: its _run_bytes keeps this from being called)


class GeminiBody:
    """Feed the body's reads; get chunks (then check ``stream.failure``); :meth:`finish` at its end."""

    __slots__ = ("_boundary", "_decoder", "_learns", "_misses", "_read", "_run_bytes", "_template", "stream")

    def __init__(self, stream: GeminiStream) -> None:
        self.stream = stream
        self._decoder = SSEDecoder()
        self._boundary = True  # the decoder holds no unfinished event
        self._template: GeminiTemplate | None = None  # this stream's text chunk, learned (text_template.py)
        self._run_bytes = _NEVER  # reads at least this long are tried on the template (none: never)
        self._read = _no_template
        self._learns = 0
        self._misses = 0  # reads in a row the template did not take

    def feed(self, raw: bytes) -> list[Chunk]:
        stream = self.stream
        # (a read of several events, once a template is learned; it checks that the read is whole events itself;
        # text_lane: no thought open, not ended)
        if len(raw) >= self._run_bytes and self._boundary and stream.text_lane:
            run = self._read(raw)
            if run is not None:
                self._misses = 0
                return stream.feed_text(run[0], run[1], run[2])
            self._misses += 1
            if self._misses >= _MAX_MISSES:  # (it no longer fits: learn again from what comes)
                self._use(None)
        if self._boundary and raw.startswith(b"data: ") and raw.endswith(_EVENT_END):
            body = raw[6:-4]
            between = body.count(_BETWEEN)
            # (only the separators' CR and LF: no other line ends, so whole one-line events)
            if body.count(b"\n") == 2 * between and body.count(b"\r") == 2 * between:
                payloads = body.split(_BETWEEN) if between else [body]
                out = _feed_all(stream, payloads)
                if self._template is None and self._learns < _MAX_LEARNS and stream.text_lane:
                    self._learns += 1
                    self._use(learn_template(payloads[-1]))
                return out
        try:
            self._decoder.feed(raw)
        except SSEDecodeError as exc:
            stream.fail_input(f"the body is not an event stream: {exc}")
            return []
        self._boundary = raw.endswith((_EVENT_END, b"\n\n"))
        return self._events()

    def _use(self, template: GeminiTemplate | None) -> None:
        self._template = template
        self._run_bytes = template.run_bytes if template is not None else _NEVER
        self._read = template.read if template is not None else _no_template
        self._misses = 0

    def finish(self) -> list[Chunk]:
        """The end of the body: its last events, then the state machine's end (a cut stream fails)."""
        self._decoder.close()
        return self._events() + self.stream.finish()

    def _events(self) -> list[Chunk]:
        return _feed_all(self.stream, [message.data for message in self._decoder.events()])
