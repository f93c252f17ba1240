"""An upstream's own Responses stream -> generation chunks, read by the protocol core (the repair half of the proxy).

How this works: the bytes of the upstream's ``/v1/responses`` stream go through :class:`StreamCore` (SSE decode,
sequencer, rules, assembler) exactly as the client reads any server, so every quirk it tolerates is tolerated here:
no ``sequence_number``, no indices, a ``response.created`` without the response fields, no ``response.created`` at
all, item ids that change on every event, text or arguments only in ``*.done``, ``response.completed`` carrying
``status: "incomplete"``, a lone ``response.failed``, a stream cut before its terminal. What the core reports about
the upstream (its violations) is counted by code: that is the *repair report*, because the gateway re-emits the
answer through its own writer, which numbers, indexes, opens and closes everything itself.

What becomes a chunk:

====================================================  ===========================================================
``response.output_text.delta``                        :class:`TextDelta`, live
``response.refusal.delta``                            :class:`RefusalDelta`, live
any other item (hosted-tool calls, ``reasoning``...)   :class:`PassedItemAdded` / ``PassedItemEvent`` /
and its events                                        ``PassedItemDone``, live (upstream/responses/passed_items.py)
``response.reasoning_text.delta``,                    :class:`ReasoningDelta`, live, when no reasoning item holds
``response.reasoning_summary_text.delta``             them
``function_call`` items                               :class:`ToolCallDelta` per call at the terminal, from the
                                                      assembled output (arguments from deltas or ``.done``; the
                                                      pipeline acts on calls only after ``Finish`` anyway)
terminal ``completed``                                :class:`Finish` ``stop`` / ``tool_calls``
terminal ``incomplete`` (or ``completed`` whose        :class:`Finish` ``length`` (``content_filter`` when that is
``status`` is ``incomplete``)                          the reason)
``failed``, ``error``, cancelled, EOF without a        :class:`UpstreamError` ``upstream_error`` naming the cause
terminal, bad input (HTML page, not JSON)
====================================================  ===========================================================

The upstream's final answer wins, as in ``respstream replay``: text that only arrived in ``*.done`` or the terminal
is sent as a last delta when it extends what was streamed, else as ``Finish.text`` (the pipeline then closes the
message with it, announced as a rewrite). Every other item of the upstream (hosted-tool calls such as
``web_search_call``, ``reasoning``, unknown types) is passed through with its events, in order
(responses/passed_items.py): reasoning deltas become :class:`ReasoningDelta` only when they belong to no such item.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from respstream.errors import BadInputError
from respstream.protocol import events as ev
from respstream.protocol.stream import StreamCore
from respstream.server.upstream.base import (
    Chunk,
    Finish,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    TextRun,
    ToolCallDelta,
    UpstreamError,
    Usage,
)
from respstream.server.upstream.chat.stream import usage_from
from respstream.server.upstream.responses.passed_items import PassedItems

__all__ = ["ResponsesTranslator"]

_TERMINAL: Final = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_INCOMPLETE_REASONS: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}
# The most of a read's unfinished last event held back for the next read (see ResponsesTranslator.feed); a longer
# one goes to the core's decoder as it comes, so a large event is never copied read after read.
_HOLD_MAX: Final = 4096
_DELTA_MARK: Final = b'"response.output_text.delta"'  # (in an event's bytes: it may be one the lane takes)


class ResponsesTranslator:
    """Feed the upstream's raw bytes; get chunks. ``done`` once a terminal was seen (stop reading then).

    ``failure`` is set to an :class:`UpstreamError` (``upstream_error``) for a failed, errored, cancelled or cut
    upstream response and for bytes that are not an event stream (after the chunks ``feed``/``finish`` returned);
    ``repairs`` (also on the error) counts what the core found wrong with the upstream's stream, by violation code.
    ``streamed`` says whether any chunk was given out (the caller's ``before_first_token``).
    """

    def __init__(self, *, name: str, max_event_size: int = 16 << 20) -> None:
        self.name = name
        self.core = StreamCore(max_event_size=max_event_size)
        self.done = False
        self.streamed = False
        self.repairs: Counter[str] = Counter()
        self._text: list[str] = []  # the output text deltas passed on, to compare with the final text
        self.passed = PassedItems()  # hosted-tool, reasoning and other items the writer does not make itself
        self._seen_violations = 0
        self._tail = b""  # the unfinished event at the end of the last read, not yet given to the core
        self._at_boundary = True  # what the core was given ends at an event's end (its decoder holds nothing)
        # Set when the upstream's response failed, was cut or is not an event stream: the caller yields the chunks
        # it was just given (text that arrived before the failure is part of the answer), then raises this.
        self.failure: UpstreamError | None = None

    # -- the API ---------------------------------------------------------------------------------------------------

    def feed(self, raw: bytes) -> list[Chunk]:
        """The chunks the bytes complete (empty after the terminal). Yield them, then raise ``failure`` if set."""
        if self.done:
            return []
        # A read that ends inside an event (a busy gateway reads many at once, cut anywhere): its unfinished event
        # waits here for the next read instead of in the core's decoder, so the next read starts at an event
        # boundary and its text deltas still take the lane below (else the whole next read went through `feed`).
        # Nothing is delayed: the tail ends no event (it is after the read's last LF LF and holds no CR), and a
        # read with no event end is held whole only when the core's decoder holds nothing it could complete.
        if self._tail:
            raw = self._tail + raw
            self._tail = b""
        cut = raw.rfind(b"\n\n") + 2
        if cut != len(raw) and len(raw) - cut <= _HOLD_MAX and b"\r" not in raw[cut:]:
            if cut == 1:
                if self._at_boundary:
                    self._tail = raw
                    return []
            else:
                self._tail = raw[cut:]
                raw = raw[:cut]
        self._at_boundary = raw.endswith(b"\n\n")
        # The bulk of a stream: one token's delta per read, taken without building its typed event.
        take = self.core.take_text_delta
        delta = take(raw)
        if delta is not None:
            if not delta:
                return []
            self._text.append(delta)
            self.streamed = True
            return [TextDelta(delta)]
        first_end = raw.find(b"\n\n") + 2
        if first_end == 1 or first_end == len(raw):
            return self._feed(raw)
        # A read of several whole events (tokens a busy gateway read late, in one go): the lane takes its runs of
        # text deltas, decoded together (one TextRun each, as a Chat Completions read's template run); an event it
        # refuses goes through `feed` with the events after it up to the next text delta, then the lane tries again
        # (a first read: created ... part added through `feed`, the first delta too, the lane the rest). When it
        # refused two text deltas with nothing taken between, the rest of the read goes through `feed` at once.
        out: list[Chunk] = []
        size = len(raw)
        at = 0
        refused = 0
        run = self.core.take_text_run
        while at < size:
            texts, at = run(raw, at)
            if texts:
                refused = 0
                self._text.extend(texts)
                out.append(TextDelta(texts[0]) if len(texts) == 1 else TextRun(texts))
            if at >= size:
                break
            end = raw.find(b"\n\n", at) + 2
            if end != 1 and raw.find(_DELTA_MARK, at, end) >= 0:
                refused += 1
            stop = _segment_end(raw, end) if end != 1 and refused < 2 else size
            out += self._feed(raw[at:stop])
            if self.done:
                break
            at = stop
        if out:
            self.streamed = True
        return out

    def _feed(self, raw: bytes) -> list[Chunk]:
        """``raw`` through the whole protocol core (typed events, rules, assembly)."""
        try:
            self.core.feed(raw)
        except BadInputError as exc:
            out = self._take(self.core.events())  # what came before the bad event is still the answer's
            self._fail(f"the upstream's stream is not a Responses event stream: {exc}")
            return out
        return self._take(self.core.events())

    def finish(self) -> list[Chunk]:
        """EOF of the upstream's body: the last chunks; ``failure`` is set when no terminal came."""
        if self.done:
            return []
        if self._tail:
            out = self._feed(self._tail)
            self._tail = b""
            if self.done:
                return out
        else:
            out = []
        try:
            self.core.close()
        except BadInputError as exc:
            out += self._take(self.core.events())
            self._fail(f"the upstream's stream is not a Responses event stream: {exc}")
            return out
        out += self._take(self.core.events())
        if not self.done:
            last = self.core.last_sequence_number
            where = f" after sequence number {last}" if last is not None else ""
            self._fail(
                f"the upstream's stream was cut: it ended without a terminal event ({self.core.assembler.events} "
                f"events{where})"
            )
        return out

    def repair_counts(self) -> dict[str, int]:
        self._count()
        return dict(sorted(self.repairs.items()))

    # -- internals -------------------------------------------------------------------------------------------------

    def _take(self, events: list[ev.Event]) -> list[Chunk]:
        out: list[Chunk] = []
        text_delta, refusal_delta = ev.OutputTextDelta, ev.RefusalDelta
        passed = self.passed.take
        for event in events:
            cls = event.__class__
            if cls is text_delta:
                delta = event.delta  # type: ignore[attr-defined]
                if delta:
                    self._text.append(delta)
                    out.append(TextDelta(delta))
            elif (chunks := passed(event)) is not None:
                out.extend(chunks)
            elif cls is refusal_delta:
                if event.delta:  # type: ignore[attr-defined]
                    out.append(RefusalDelta(event.delta))  # type: ignore[attr-defined]
            elif cls is ev.ReasoningTextDelta or cls is ev.ReasoningSummaryTextDelta:
                if event.delta:  # type: ignore[attr-defined]
                    out.append(ReasoningDelta(event.delta))  # type: ignore[attr-defined]
            elif event.type in _TERMINAL and self.core.terminal:
                # (An `error` may be followed by its `response.failed`: either way the response failed.)
                self.done = True
                if out:
                    self.streamed = True
                out.extend(self._terminal())
                return out
        if out:
            self.streamed = True
        return out

    def _terminal(self) -> list[Chunk]:
        result = self.core.result
        status = result.status
        if status in ("failed", "error", "cancelled"):
            if status == "cancelled":
                self._fail("the upstream cancelled the response")
                return []
            err = result.error or {}
            code = err.get("code") or "unknown"
            message = err.get("message") or "no message"
            self._fail(f"the upstream response failed ({code}): {message}")
            return []
        out: list[Chunk] = self.passed.close(result.output)
        final_text: str | None = None
        streamed = "".join(self._text)
        final = result.output_text
        if final != streamed:
            if final.startswith(streamed):
                out.append(TextDelta(final[len(streamed) :]))  # only in *.done or the terminal: sent now
            else:
                final_text = final
        calls = result.tool_calls
        for index, call in enumerate(calls):
            out.append(
                ToolCallDelta(
                    index,
                    call_id=_str(call.get("call_id")),
                    name=_str(call.get("name")),
                    arguments=_str(call.get("arguments")) or "",
                )
            )
        if status == "incomplete":
            details = result.incomplete_details or {}
            reason = _INCOMPLETE_REASONS.get(str(details.get("reason")), "length")
        else:
            reason = "tool_calls" if calls else "stop"
        out.append(Finish(reason, usage=_usage(result.usage), text=final_text, repairs=self.repair_counts()))
        return out

    def _count(self) -> None:
        found = self.core.violations
        for violation in found[self._seen_violations :]:
            self.repairs[violation.code] += 1
        self._seen_violations = len(found)
        if self.core.violations_dropped:
            self.repairs["dropped"] = self.core.violations_dropped

    def _fail(self, message: str) -> None:
        self.done = True
        self._count()
        error = UpstreamError("upstream_error", f"{self.name}: {message}", before_first_token=not self.streamed)
        error.repairs = dict(sorted(self.repairs.items()))
        self.failure = error


def _segment_end(raw: bytes, at: int) -> int:
    """Where the first event from ``at`` that may be a text delta starts (the end of ``raw`` when none does)."""
    size = len(raw)
    while at < size:
        end = raw.find(b"\n\n", at) + 2
        if end == 1 or raw.find(_DELTA_MARK, at, end) >= 0:
            break
        at = end
    return at if at < size else size


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _usage(usage: Any) -> Usage | None:
    return usage_from(usage, "input_tokens", "output_tokens")
