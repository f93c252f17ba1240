"""Notice a degenerate answer (a model repeating itself) while it streams, in linear time. No IO.

How this works: :class:`LoopGuard` is fed the answer text delta by delta and returns a reason once the text loops:

- *short cycles*: every ``check_every`` characters, the last ``window`` characters are compared with themselves
  shifted by each period ``p`` up to ``max_period`` (``tail[p:] == tail[:-p]``, a C-level comparison). A match means
  the last ``window`` characters are one ``p``-character unit over and over ("the the the ...", one sentence
  repeated without end). Cost per check: ``max_period`` comparisons of ``window`` bytes, once per ``check_every``
  characters, so a constant amount of work per character.
- *repeated sentences*: the text is cut at sentence ends and line breaks; each finished sentence of at least
  ``min_sentence`` characters (lower-cased, spaces collapsed) is counted, and one seen ``max_repeats`` times ends
  the answer. Inside a fenced code block sentences are not counted (code legitimately repeats lines).

Each character is looked at a bounded number of times; memory is the set of distinct sentences (bounded by the
output cap). :func:`guard_stream` applies it to an upstream chunk stream: on a loop it stops reading the upstream
(closing it stops the generation) and ends with ``Finish("repetition")``, which the pipeline reports as an
``incomplete`` response with ``incomplete_details.reason = "repetition"``. That ``Finish`` carries the usage the
upstream would have sent at the end (stopping early loses its usage chunk, and a response that streamed a thousand
tokens must not report 0): the output tokens streamed so far (a llama.cpp-style server streams one token a chunk)
and the prompt's tokens from ``count_input`` (the server's tokenizer) or, failing that, an estimate.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable

from respstream.server.upstream.base import Chunk, Finish, ReasoningDelta, RefusalDelta, TextDelta, Usage

__all__ = ["LoopGuard", "guard_stream"]

_SENTENCE_END = re.compile(r"[.!?。\n]")
_SPACES = re.compile(r"\s+")


class LoopGuard:
    """Feed text with :meth:`feed`; it returns a human reason once the text loops (then keeps returning it)."""

    def __init__(
        self,
        *,
        window: int = 240,
        max_period: int = 80,
        check_every: int = 40,
        min_sentence: int = 16,
        max_repeats: int = 3,
    ) -> None:
        if window < 2 * max_period:
            raise ValueError("window must be at least twice max_period (a cycle has to repeat to be one)")
        self.window = window
        self.max_period = max_period
        self.check_every = check_every
        self.min_sentence = min_sentence
        self.max_repeats = max_repeats
        self._tail = ""
        self._since_check = 0
        self._open = ""  # the sentence being written
        self._counts: dict[str, int] = {}
        self._in_code = False
        self.reason: str | None = None

    def feed(self, text: str) -> str | None:
        if self.reason is not None or not text:
            return self.reason
        self._tail = (self._tail + text)[-self.window:]
        self._since_check += len(text)
        if self._since_check >= self.check_every and len(self._tail) == self.window:
            self._since_check = 0
            self.reason = self._short_cycle()
            if self.reason is not None:
                return self.reason
        self.reason = self._sentences(text)
        return self.reason

    def _short_cycle(self) -> str | None:
        tail = self._tail
        if not tail.strip():
            return None  # whitespace padding is the whitespace rewrite's business, not a loop
        for period in range(1, self.max_period + 1):
            if tail[period:] == tail[:-period]:
                unit = _SPACES.sub(" ", tail[-period:]).strip()
                return f"the answer repeats {unit[:60]!r} over and over"
        return None

    def _sentences(self, text: str) -> str | None:
        start = 0
        for match in _SENTENCE_END.finditer(text):
            piece = self._open + text[start:match.end()]
            self._open = ""
            start = match.end()
            reason = self._count(piece)
            if reason is not None:
                return reason
        self._open += text[start:]
        if len(self._open) > 4 * self.window:
            self._open = self._open[-self.window:]  # a sentence without end: the short-cycle check covers it
        return None

    def _count(self, sentence: str) -> str | None:
        if sentence.count("```") % 2:
            self._in_code = not self._in_code
            return None
        if self._in_code:
            return None
        key = _SPACES.sub(" ", sentence).strip().lower()
        if len(key) < self.min_sentence:
            return None
        seen = self._counts.get(key, 0) + 1
        self._counts[key] = seen
        if seen >= self.max_repeats:
            return f"the answer repeats the sentence {key[:60]!r} {seen} times"
        return None


_GENERATED = (TextDelta, ReasoningDelta, RefusalDelta)


async def guard_stream(chunks: AsyncIterator[Chunk], guard: LoopGuard, *, input_tokens: int = 0,
                       count_input: Callable[[], Awaitable[int | None]] | None = None) -> AsyncIterator[Chunk]:
    """Pass ``chunks`` through; when the text loops, stop reading them and end with ``Finish("repetition")`` and the
    usage so far (see the module docstring): ``count_input()`` when it gives a number, else ``input_tokens``."""
    streamed = 0
    looped = False
    try:
        async for chunk in chunks:
            kind = type(chunk)
            if kind in _GENERATED:
                streamed += 1
            if kind is TextDelta and guard.feed(chunk.text) is not None:  # type: ignore[union-attr,arg-type]
                looped = True
                break
            yield chunk
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()  # stop the stream under us now: that ends the upstream's generation
    if looped:  # counted after the upstream stopped, so the count does not wait behind the generation
        counted = await count_input() if count_input is not None else None
        usage = Usage(input_tokens=counted if counted is not None else input_tokens, output_tokens=streamed)
        yield Finish(reason="repetition", usage=usage)
