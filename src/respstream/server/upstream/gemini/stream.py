"""Gemini's ``streamGenerateContent`` chunks -> generation chunks: a sans-IO state machine (no sockets, no clocks).

How this works: :meth:`GeminiStream.feed` takes one parsed ``GenerateContentResponse`` (the JSON of one SSE event)
and returns the :mod:`~respstream.server.upstream.base` chunks it completes; :meth:`GeminiStream.finish` is the end
of the body. Each part of ``candidates[0].content.parts`` becomes, in order:

=====================================  ==========================================================================
``{"text", "thought": true}``          a ``reasoning`` item's summary text (passed-item chunks), never answer text
``{"text"}``                           :class:`TextDelta` (an empty text adds nothing)
``{"functionCall": {name, args, id}}``  :class:`ToolCallDelta` with the whole ``args`` as JSON (``"{}"`` when
                                       empty); ``call_id`` = ``id`` when Gemini gave one, else a fresh distinct one
``thoughtSignature`` on any part       the ``encrypted_content`` of a ``reasoning`` item placed right before the
                                       item the signed part belongs to (the open thought item when there is one):
                                       on the next turn it goes back on the part made from the item that follows
                                       it (gemini/contents.py), or on a trailing empty text part when none does
=====================================  ==========================================================================

``finishReason`` -> :class:`Finish` (``STOP`` -> ``stop``, ``tool_calls`` when calls came; ``MAX_TOKENS`` ->
``length``; the safety family -> ``content_filter``; anything else fails); ``promptFeedback.blockReason`` with no
candidates -> ``content_filter``; ``usageMetadata`` is cumulative, so the last one wins (never summed):
``input_tokens`` = ``promptTokenCount``, ``output_tokens`` = ``candidatesTokenCount`` + ``thoughtsTokenCount``,
``reasoning_tokens`` = ``thoughtsTokenCount``, ``cached_tokens`` = ``cachedContentTokenCount``. An ``error`` object
in the stream, or an end of body before any ``finishReason``, sets ``failure`` (the response then fails: never
``completed``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, Final

import msgspec

from respstream.server.upstream.base import (
    Chunk,
    Finish,
    PassedItemAdded,
    PassedItemDone,
    PassedItemEvent,
    TextDelta,
    TextRun,
    ToolCallDelta,
    UpstreamError,
    Usage,
)
from respstream.server.upstream.gemini.text_chunk import UsageCounts, usage_counts

__all__ = ["GENERATED_CALL_PREFIX", "GeminiStream", "new_call_id"]

GENERATED_CALL_PREFIX: Final = "call_gm_"  # a call id we made (Gemini gave none): never sent back as Gemini's id
CONTENT_FILTER_REASONS: Final = frozenset({
    "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
})
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def new_call_id() -> str:
    return GENERATED_CALL_PREFIX + secrets.token_hex(12)


class _Reasoning:
    """An open ``reasoning`` item: its passed-item key, summary text so far and signature."""

    __slots__ = ("key", "signature", "text")

    def __init__(self, key: int) -> None:
        self.key = key
        self.text: list[str] = []
        self.signature: str | None = None


class GeminiStream:
    """Feed parsed chunks; get generation chunks. ``done`` once a ``finishReason`` (or a block) came; ``failure``
    is the :class:`UpstreamError` to raise after yielding what ``feed``/``finish`` returned; ``streamed`` says
    whether any chunk was given out (the caller's ``before_first_token``)."""

    def __init__(self, *, name: str, new_id: Callable[[], str] = new_call_id, rename: Callable[[str], str] = str
                 ) -> None:
        """``rename``: a function name as Gemini called it -> the pipeline's (provider_tools.ToolNames)."""
        self.name = name
        self._rename = rename
        self.done = False
        self.streamed = False
        self.failure: UpstreamError | None = None
        self._new_id = new_id
        self._keys = 0
        self._reasoning: _Reasoning | None = None
        self._calls = 0
        # The last usageMetadata (read at the end: it is cumulative): decoded, typed (gemini/text_chunk.py), or the
        # JSON bytes of an object that gemini/text_template.py checked (decoded at the end, as the full path does)
        self._usage: dict[str, Any] | UsageCounts | bytes | None = None
        self._chunks = 0

    # -- the API ---------------------------------------------------------------------------------------------------

    def feed(self, chunk: Any) -> list[Chunk]:
        """The chunks one ``GenerateContentResponse`` completes (nothing after the end)."""
        if self.done:
            return []
        self._chunks += 1
        if chunk.__class__ is not dict:
            self._fail(f"stream event {self._chunks} is not a JSON object")
            return []
        error = chunk.get("error")
        if error is not None:
            self._fail(f"the stream reported an error {_error_text(error)}")
            return self._close_reasoning()
        usage = chunk.get("usageMetadata")
        if usage.__class__ is dict:
            self._usage = usage
        out: list[Chunk] = []
        candidates = chunk.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, dict):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            if isinstance(parts, list):
                for part in parts:
                    if isinstance(part, dict):
                        self._part(part, out)
            if out:
                self.streamed = True  # (before a failing finish: what this event showed is output)
            reason = candidate.get("finishReason")
            if isinstance(reason, str) and reason:
                out += self._finish(reason)
        elif candidates is None or candidates == []:
            feedback = chunk.get("promptFeedback")
            block = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if isinstance(block, str) and block:
                out += self._finish("PROMPT_BLOCKED:" + block)
        if out:
            self.streamed = True
        return out

    @property
    def text_lane(self) -> bool:
        """Whether :meth:`feed_text` may take the next chunk (no thought item open, not ended)."""
        return self._reasoning is None and not self.done

    def feed_text(self, texts: list[str], usage: UsageCounts | bytes | None, events: int = 1) -> list[Chunk]:
        """What :meth:`feed` gives for ``events`` chunks of bare text parts and no finish (gemini/reads.py decodes
        those typed; ``usage``: the last usage object among them), as one :class:`TextRun` when they hold several
        texts: only when :attr:`text_lane`."""
        self._chunks += events
        if usage is not None:
            self._usage = usage
        if not texts:
            return []
        self.streamed = True
        return [TextDelta(texts[0])] if len(texts) == 1 else [TextRun(texts)]

    def finish(self) -> list[Chunk]:
        """The end of the body: nothing more when the stream finished, else ``failure`` says it was cut."""
        if self.done:
            return []
        out = self._close_reasoning()
        calls = f", {self._calls} function call(s)" if self._calls else ""
        self._fail(f"the stream was cut: it ended without a finishReason (after {self._chunks} event(s){calls})")
        return out

    # -- parts -----------------------------------------------------------------------------------------------------

    def _part(self, part: dict[str, Any], out: list[Chunk]) -> None:
        if len(part) == 1 and self._reasoning is None:  # (the bulk of a stream: a bare text part)
            text = part.get("text")
            if text.__class__ is str:
                if text:
                    out.append(TextDelta(text))  # type: ignore[arg-type]
                return
        signature = part.get("thoughtSignature")
        signature = signature if isinstance(signature, str) and signature else None
        text = part.get("text")
        if part.get("thought") is True:
            reasoning = self._reasoning
            if reasoning is None or (signature is not None and reasoning.signature is not None):
                out += self._close_reasoning()
                reasoning = self._open_reasoning(out)
            if isinstance(text, str) and text:
                reasoning.text.append(text)
                out.append(PassedItemEvent(reasoning.key, "response.reasoning_summary_text.delta",
                                           {"summary_index": 0, "delta": text}))
            if signature is not None:
                reasoning.signature = signature
            return
        call = part.get("functionCall")
        if signature is None and not isinstance(call, dict) and not text:
            return  # an empty part (no text, no call, no signature) changes nothing
        if signature is not None:
            reasoning = self._reasoning
            if reasoning is None or reasoning.signature is not None:
                out += self._close_reasoning()
                reasoning = self._open_reasoning(out)
            reasoning.signature = signature
        out += self._close_reasoning()
        if isinstance(call, dict):
            args = call.get("args")
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = self._new_id()
            out.append(ToolCallDelta(
                self._calls,
                call_id=call_id,
                name=self._rename(str(call.get("name") or "")),
                arguments=_encode(args).decode() if isinstance(args, dict) and args else "{}",
            ))
            self._calls += 1
        elif isinstance(text, str) and text:
            out.append(TextDelta(text))

    def _open_reasoning(self, out: list[Chunk]) -> _Reasoning:
        reasoning = self._reasoning = _Reasoning(self._keys)
        self._keys += 1
        # ("rs_": the writer keeps the kind of prefix for the id it gives the item, as OpenAI's reasoning ids have)
        out.append(PassedItemAdded(reasoning.key, {"type": "reasoning", "id": "rs_", "summary": []}))
        out.append(PassedItemEvent(reasoning.key, "response.reasoning_summary_part.added",
                                   {"summary_index": 0, "part": {"type": "summary_text", "text": ""}}))
        return reasoning

    def _close_reasoning(self) -> list[Chunk]:
        reasoning = self._reasoning
        if reasoning is None:
            return []
        self._reasoning = None
        text = "".join(reasoning.text)
        part = {"type": "summary_text", "text": text}
        item: dict[str, Any] = {"type": "reasoning", "summary": [part] if text else []}
        if reasoning.signature is not None:
            item["encrypted_content"] = reasoning.signature
        return [
            PassedItemEvent(reasoning.key, "response.reasoning_summary_text.done", {"summary_index": 0, "text": text}),
            PassedItemEvent(reasoning.key, "response.reasoning_summary_part.done", {"summary_index": 0, "part": part}),
            PassedItemDone(reasoning.key, item),
        ]

    # -- the end ---------------------------------------------------------------------------------------------------

    def _finish(self, reason: str) -> list[Chunk]:
        out = self._close_reasoning()
        self.done = True
        if reason == "STOP":
            finish = "tool_calls" if self._calls else "stop"
        elif reason == "MAX_TOKENS":
            finish = "length"
        elif reason in CONTENT_FILTER_REASONS or reason.startswith("PROMPT_BLOCKED:"):
            finish = "content_filter"
        else:  # MALFORMED_FUNCTION_CALL, OTHER, LANGUAGE, UNEXPECTED_TOOL_CALL, ...: no answer to show as done
            self._fail(f"the model stopped with finishReason {reason}")
            return out
        usage = self._usage
        if isinstance(usage, bytes):  # (the template's: an object, checked JSON)
            usage = _decode(usage)
        elif isinstance(usage, UsageCounts):  # (the typed lane's)
            usage = usage_counts(usage)
        out.append(Finish(finish, usage=_usage(usage) if usage is not None else None))
        return out

    def fail_input(self, message: str) -> None:
        """The body itself is bad (not an event stream): fail, naming why."""
        if not self.done:
            self._fail(message)

    def _fail(self, message: str) -> None:
        self.done = True
        self.failure = UpstreamError("upstream_error", f"{self.name}: {message}",
                                     before_first_token=not self.streamed)


def _usage(raw: dict[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and value > 0 else 0

    thoughts = count("thoughtsTokenCount")
    return Usage(input_tokens=count("promptTokenCount"), output_tokens=count("candidatesTokenCount") + thoughts,
                 reasoning_tokens=thoughts, cached_tokens=count("cachedContentTokenCount"))


def _error_text(error: Any) -> str:
    if not isinstance(error, dict):
        return f"({str(error)[:200]})"
    status = error.get("status") or error.get("code") or "unknown"
    return f"({status}): {str(error.get('message') or 'no message')[:500]}"
