"""Chat Completions stream chunks (JSON payloads of ``data:`` lines) -> upstream :data:`Chunk` values. No IO.

How this works: one :class:`ChunkTranslator` per generation. ``feed(payload)`` returns the chunks one payload gives:
``reasoning_content``/``reasoning`` -> :class:`ReasoningDelta`; ``content`` through a :class:`ThinkSplitter` ->
:class:`TextDelta`/:class:`ReasoningDelta`; ``refusal`` -> :class:`RefusalDelta`; ``tool_calls[i]`` ->
:class:`ToolCallDelta` (assembled from their fragments by :mod:`~respstream.server.upstream.chat.tool_call_fragments`).
``finish()`` (after ``[DONE]`` or EOF) flushes and returns the :class:`Finish`. Only ``choices[0]`` is used.

``feed_plain(payloads)`` decodes a read's payloads in one call, and a stream's plain-text run through the chunk
template it learned from its own chunks (:mod:`~respstream.server.upstream.chat.chunk_template`): only the content
strings are decoded. Usage and finish reasons are mapped here for both APIs (:func:`usage_from`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.server.upstream.base import (
    Chunk,
    Finish,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    TextRun,
    Usage,
)
from respstream.server.upstream.chat.chunk_template import PlainTemplate, learn_template
from respstream.server.upstream.chat.think import ThinkSplitter
from respstream.server.upstream.chat.tool_call_fragments import ToolCallFragments

__all__ = ["ChunkTranslator", "map_finish_reason", "map_usage", "usage_from"]

_FINISH = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

class _WireDelta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[Any] | None = None  # rare; fragments are read leniently, one dict at a time


class _WireChoice(msgspec.Struct, gc=False):
    delta: _WireDelta | None = None
    finish_reason: str | None = None
    logprobs: Any = None  # present only when the request asked for logprobs


class _WireChunk(msgspec.Struct):
    """The fields of a ``chat.completion.chunk`` we use; the rest are skipped by the decoder without being built."""

    choices: list[_WireChoice] | None = None
    usage: dict[str, Any] | None = None
    error: Any = None
    timings: dict[str, Any] | None = None  # llama.cpp's: cache_n is the prompt tokens it reused from its KV cache


# Typed decoding builds only the fields above (no dicts for the ignored ``id``/``model``/``object``...). A chunk of
# an unexpected shape fails validation and goes through the generic decoder instead, which ignores wrong types.
_decode_wire = msgspec.json.Decoder(_WireChunk)
_decode_wire_list = msgspec.json.Decoder(list[_WireChunk])
_decode = msgspec.json.Decoder()


_MAX_TEMPLATE_MISSES = 3
_LEARN_FROM = 8  # payloads in a read before a template is worth learning from its first ones
_TEMPLATE_RUN = 4  # fitting payloads in a row before the template reads them


def _plain_content(chunk: _WireChunk) -> str | None:
    """The text of a chunk that is one choice's plain answer text and nothing else (no usage, finish, logprobs,
    reasoning, refusal or tool calls), else None."""
    choices = chunk.choices
    if not choices or chunk.usage is not None or chunk.error is not None:
        return None
    choice = choices[0]
    delta = choice.delta
    if (delta is None or choice.finish_reason is not None or choice.logprobs is not None
            or delta.reasoning_content is not None or delta.reasoning is not None or delta.refusal is not None
            or delta.tool_calls is not None):
        return None
    return delta.content


def _plain_text(payload: bytes) -> str | None:
    """:func:`_plain_content` of one payload through the typed decoder; None when it is not that (or not JSON)."""
    try:
        return _plain_content(_decode_wire.decode(payload))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _logprobs(value: Any) -> list[Any] | None:
    """``choices[0].logprobs.content`` (a list of token entries), else ``None``."""
    content = value.get("content") if isinstance(value, dict) else None
    return [e for e in content if isinstance(e, dict)] if isinstance(content, list) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def map_finish_reason(reason: str | None) -> str:
    """Upstream ``finish_reason`` -> ``stop|length|tool_calls|content_filter``. Raises ValueError on ``error``."""
    if reason == "error":
        raise ValueError("upstream reported finish_reason 'error'")
    return _FINISH.get(reason or "stop", "stop")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_from(usage: Any, input_key: str, output_key: str) -> Usage | None:
    """A usage object -> :class:`Usage`: ``<input_key>``/``<output_key>`` with their ``*_details`` (reasoning and
    cached tokens). Chat Completions says prompt/completion, the Responses API input/output."""
    if not isinstance(usage, dict):
        return None
    output_details = usage.get(f"{output_key}_details")
    input_details = usage.get(f"{input_key}_details")
    return Usage(
        input_tokens=_int(usage.get(input_key)),
        output_tokens=_int(usage.get(output_key)),
        reasoning_tokens=_int(output_details.get("reasoning_tokens")) if isinstance(output_details, dict) else 0,
        cached_tokens=_int(input_details.get("cached_tokens")) if isinstance(input_details, dict) else 0,
    )


def _with_cache_n(usage: Usage, timings: dict[str, Any]) -> Usage:
    """``usage`` with llama.cpp's ``timings.cache_n`` as its cached tokens: llama.cpp builds older than its
    ``prompt_tokens_details`` report what they reused from the KV cache only there. Never more than the prompt."""
    cache_n = min(_int(timings.get("cache_n")), usage.input_tokens)
    return msgspec.structs.replace(usage, cached_tokens=cache_n) if cache_n else usage


def map_usage(usage: Any) -> Usage | None:
    """Chat Completions ``usage`` -> :class:`Usage` (prompt -> input, completion -> output, details kept)."""
    return usage_from(usage, "prompt_tokens", "completion_tokens")


class ChunkTranslator:
    """Stateful translation of one streamed completion. ``feed``/``finish`` raise ValueError on malformed input."""

    def __init__(self) -> None:
        self._think = ThinkSplitter()
        self._calls = ToolCallFragments()
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._payloads = 0
        self.done = False  # ``[DONE]`` seen
        self._template: PlainTemplate | None = None  # this stream's plain chunk, learned (see chunk_template)
        self._misses = 0

    def feed(self, payload: bytes) -> list[Chunk]:
        self._payloads += 1
        if payload == b"[DONE]" or (payload[:1] != b"{" and payload.strip() == b"[DONE]"):
            self.done = True
            return []
        try:
            chunk = _decode_wire.decode(payload)
        except msgspec.ValidationError:
            chunk = self._lenient(payload)  # valid JSON of an unusual shape: the slow, forgiving path
        except msgspec.DecodeError:
            raise ValueError(
                f"malformed chunk #{self._payloads}: not JSON: {payload[:80].decode('utf-8', 'replace')!r}"
            ) from None
        if chunk.error:
            err = chunk.error
            message = err.get("message") if isinstance(err, dict) else err
            raise ValueError(f"upstream sent an error chunk: {message}")
        out: list[Chunk] = []
        self._translate(chunk, out)
        return out

    def _translate(self, chunk: _WireChunk, out: list[Chunk]) -> None:
        """What one decoded chunk (not an error) says, appended to ``out``; usage and finish reason kept."""
        if chunk.usage is not None:
            usage = map_usage(chunk.usage)
            if usage is not None:
                if not usage.cached_tokens and chunk.timings is not None:
                    usage = _with_cache_n(usage, chunk.timings)
                self._usage = usage
        choices = chunk.choices
        if not choices:
            return
        choice = choices[0]
        delta = choice.delta
        if delta is not None:
            reasoning = delta.reasoning_content or delta.reasoning
            if reasoning:
                out.append(ReasoningDelta(reasoning))
            content = delta.content
            if content:
                think = self._think
                if not think.idle or "<" in content:
                    for kind, text in think.feed(content):
                        out.append(TextDelta(text) if kind == "text" else ReasoningDelta(text))
                elif choice.logprobs is None:  # the common case: plain answer text, nothing held back
                    out.append(TextDelta(content))
                else:
                    out.append(TextDelta(content, _logprobs(choice.logprobs)))
            if delta.refusal:
                out.append(RefusalDelta(delta.refusal))
            if delta.tool_calls:
                for position, fragment in enumerate(delta.tool_calls):
                    if isinstance(fragment, dict):
                        self._calls.add(fragment, position, out)
        if choice.finish_reason:
            self._finish_reason = choice.finish_reason

    def feed_plain(self, payloads: list[bytes]) -> tuple[list[Chunk], int]:
        """The leading part of ``payloads`` decoded in one call: ``(chunks, n)`` where ``chunks`` is what ``feed``
        would return for the first ``n`` payloads in turn, concatenated. The part ends before the first error chunk
        (the caller feeds it and the rest one by one, which raises with its number); ``[DONE]`` counts when last.
        ``n`` is 0 when the batch could not be decoded as a whole (then every payload goes through ``feed``).

        The plain-text run of a read (after the odd first chunk, before the finish and usage) is read through this
        stream's :class:`PlainTemplate` when it has one: only the content strings are decoded."""
        if self.done or not payloads:
            return [], 0
        done = payloads[-1] == b"[DONE]"
        body = payloads[:-1] if done else payloads
        if self._template is None and len(body) >= _LEARN_FROM and self._misses < _MAX_TEMPLATE_MISSES:
            self._learn_early(body)
        template = self._template
        if template is not None and len(body) == 1 and self._think.idle:  # (a read of one token: a real model's)
            text = template.text(body[0])
            if text is not None and "<" not in text:
                self._misses = 0
                return self._took([TextDelta(text)] if text else [], 1, 1, done)
        if template is not None and len(body) >= _TEMPLATE_RUN:  # (a read of two or three goes the ordinary way)
            start, end = template.run(body)
            if end - start >= _TEMPLATE_RUN:
                out, taken = self._ordinary(body[:start]) if start else ([], 0)
                if taken < start:
                    return self._took(out, taken, len(body), done)
                if self._think.idle:
                    texts = template.texts(body[start:end])
                    if texts is None:
                        self._drop_template()
                    elif "<" not in "".join(texts):  # ("<": the think splitter must see it)
                        self._misses = 0
                        if "" in texts:
                            texts = [text for text in texts if text]
                        if texts:
                            out.append(TextRun(texts))
                        start = end
                if start == len(body):  # (the usual read: the run was all of it)
                    return self._took(out, start, start, done)
                rest, more = self._ordinary(body[start:])
                return self._took(out + rest, start + more, len(body), done)
        out, taken = self._ordinary(body, learn=not done)
        return self._took(out, taken, len(body), done)

    def _ordinary(self, body: list[bytes], *, learn: bool = False) -> tuple[list[Chunk], int]:
        """Every payload of ``body`` decoded into chunk objects in one call (see :meth:`feed_plain`); ``learn``: take
        a template from this read when it has none that fits."""
        try:
            chunks = _decode_wire_list.decode(b"[" + b",".join(body) + b"]")
        except (msgspec.ValidationError, msgspec.DecodeError):
            return [], 0
        if len(chunks) != len(body):  # a payload that is two values (`{..},{..}`): not one chunk each
            return [], 0
        out: list[Chunk] = []
        append = out.append
        taken = 0
        translate = self._translate
        idle = self._think.idle
        for chunk in chunks:
            if chunk.error:
                break
            taken += 1
            # Plain answer text and nothing else (most of what a read without a template holds): what _translate
            # does with it, without its checks for what is not there.
            if idle:
                content = _plain_content(chunk)
                if content and "<" not in content:
                    append(TextDelta(content))
                    continue
            translate(chunk, out)
            idle = self._think.idle
        if learn and chunks and taken == len(body) and self._misses < _MAX_TEMPLATE_MISSES and not (
                self._template is not None and self._template.fits(body[-1])):  # (it still fits: nothing to learn)
            for at in (-1, 0):  # (the stream's last read has nothing after it to read faster: not asked to learn)
                content = _plain_content(chunks[at])
                if content:
                    if self._template is None or not self._template.fits(body[at]):
                        self._drop_template()
                        self._learn(body[at], content)
                    break
        return out, taken

    def _took(self, out: list[Chunk], taken: int, whole: int, done: bool) -> tuple[list[Chunk], int]:
        if done and taken == whole:
            taken += 1
            self.done = True
        self._payloads += taken
        return out, taken

    def _learn_early(self, body: list[bytes]) -> None:
        """A template from the first or second payload of a long read (the first is often a role-only chunk), so
        the rest of this very read is read through it."""
        for payload in body[:2]:
            content = _plain_text(payload)
            if content:
                self._learn(payload, content)
                return
        self._misses += 1

    def _learn(self, payload: bytes, content: str) -> None:
        """A template from a plain chunk. A template that did not fit before it read anything, or one that could
        not be learned, is a miss; after a few misses in a row (chunks that never repeat: a random field in each, or
        an unusual way of writing strings) this stream stops learning."""
        if self._misses >= _MAX_TEMPLATE_MISSES:
            return
        self._template = learn_template(payload, content, _plain_text)
        if self._template is None:
            self._misses += 1

    def _drop_template(self) -> None:
        """The template did not fit (a field changed): forget it, a miss when it never read anything."""
        if self._template is not None and not self._template.used:
            self._misses += 1
        self._template = None

    def _lenient(self, payload: bytes) -> _WireChunk:
        """Decode generically and keep what has the expected type (a number where text belongs is ignored)."""
        data = _decode.decode(payload)
        if not isinstance(data, dict):
            raise ValueError(f"malformed chunk #{self._payloads}: not a JSON object")
        choices = data.get("choices")
        wire_choices: list[_WireChoice] | None = None
        if choices:
            if not isinstance(choices, list) or not isinstance(choices[0], dict):
                raise ValueError(f"malformed chunk #{self._payloads}: 'choices' is not a list of objects")
            choice = choices[0]
            raw = choice.get("delta")
            delta = None
            if isinstance(raw, dict):
                tool_calls = raw.get("tool_calls")
                delta = _WireDelta(
                    content=_text(raw.get("content")),
                    reasoning_content=_text(raw.get("reasoning_content")),
                    reasoning=_text(raw.get("reasoning")),
                    refusal=_text(raw.get("refusal")),
                    tool_calls=tool_calls if isinstance(tool_calls, list) else None,
                )
            wire_choices = [_WireChoice(delta=delta, finish_reason=_text(choice.get("finish_reason")),
                                        logprobs=choice.get("logprobs"))]
        usage, timings = data.get("usage"), data.get("timings")
        return _WireChunk(
            choices=wire_choices, usage=usage if isinstance(usage, dict) else None, error=data.get("error"),
            timings=timings if isinstance(timings, dict) else None,
        )

    def finish(self) -> list[Chunk]:
        """End of stream: flush held-back text and return the final chunks ending with :class:`Finish`."""
        out: list[Chunk] = [
            TextDelta(text) if kind == "text" else ReasoningDelta(text) for kind, text in self._think.flush()
        ]
        if self._finish_reason is None and not self.done:
            raise ValueError("stream ended before a finish_reason or [DONE] (connection dropped?)")
        self._calls.finish(out)
        reason = map_finish_reason(self._finish_reason)
        if self._calls and reason == "stop":
            reason = "tool_calls"  # some servers say "stop" after a tool call; the call is what matters
        elif not self._calls and reason == "tool_calls":
            reason = "stop"
        out.append(Finish(reason=reason, usage=self._usage))
        return out
