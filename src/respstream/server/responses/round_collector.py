"""What one round's upstream chunks do to the writer, and what the round ends with.

How this works: :meth:`RoundCollector.take` hands one chunk to the writer (text, reasoning and refusal deltas become
events at once; tool call fragments are gathered per call index; a native Responses upstream's own items go through
:class:`~respstream.server.responses.item_relay.ItemRelay`) and says when the round's ``Finish`` came. The pipeline
feeds it chunk by chunk from ``Upstream.generate``, or a batch at a time from ``generate_batches`` (an upstream that
reads several chunks at once, the Chat Completions adapter: everything one read of the body held); both make the same
writer calls in the same order, so the events, their sequence numbers and their bytes are the same. Chunks after
``Finish`` in a batch are ignored, as the chunk-by-chunk loop stops reading there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from respstream.server.events.writer import ResponseWriter
from respstream.server.responses.item_relay import ItemRelay
from respstream.server.responses.tool_rounds import RoundResult, ToolCall
from respstream.server.upstream.base import (
    Finish,
    PassedItemAdded,
    PassedItemDone,
    PassedItemEvent,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    TextRun,
    ToolCallDelta,
)

__all__ = ["RoundCollector"]


class RoundCollector:
    """One round's chunks into ``writer``; ``on_first(kind)`` is called with the type of the round's first chunk."""

    __slots__ = ("_calls", "_first", "_on_first", "_relay", "_text", "finish", "writer")

    def __init__(self, writer: ResponseWriter, on_first: Callable[[type], None]) -> None:
        self.writer = writer
        self.finish = Finish("stop")
        self._text: list[str] = []
        self._calls: dict[int, ToolCall] = {}
        self._relay = ItemRelay(writer)  # a native Responses upstream's hosted-tool and reasoning items
        self._first = True
        self._on_first = on_first

    def take(self, chunk: Any) -> bool:
        """Apply one chunk; True when it was the round's ``Finish`` (read no further)."""
        kind = type(chunk)
        w = self.writer
        if self._first:
            self._first = False
            self._on_first(kind)
        if kind is TextDelta:
            if chunk.text:
                self._text.append(chunk.text)
                w.text_delta(chunk.text, chunk.logprobs)
        elif kind is TextRun:
            self._text.extend(chunk.texts)
            w.text_deltas(chunk.texts)
        elif kind is ReasoningDelta:
            if chunk.text:
                w.reasoning_delta(chunk.text)
        elif kind is RefusalDelta:
            if chunk.text:
                w.refusal_delta(chunk.text)
        elif kind is ToolCallDelta:
            call = self._calls.get(chunk.index)
            if call is None:
                call = self._calls[chunk.index] = ToolCall(chunk.call_id or f"call_{w.record.id[-8:]}_{chunk.index}",
                                                           chunk.name or "")
            call.arguments.append(chunk.arguments)
        elif kind is PassedItemEvent:
            self._relay.event(chunk)
        elif kind is PassedItemAdded:
            self._relay.added(chunk)
        elif kind is PassedItemDone:
            self._relay.done(chunk)
        elif kind is Finish:
            self.finish = chunk
            w.note_repairs(chunk.repairs)
            return True
        return False

    def take_all(self, chunks: list[Any]) -> bool:
        """Apply a batch in order, as :meth:`take` one by one; True when it held the ``Finish``. A run of plain
        text deltas (no logprobs; :class:`TextRun` and single ones alike) goes to the writer in one call: the same
        events, one step for the run."""
        if len(chunks) == 1 and not self._first:
            only = chunks[0]
            kind = only.__class__
            if kind is TextRun:  # (a read of plain text through the chunk template: most reads)
                self._text.extend(only.texts)
                self.writer.text_deltas(only.texts)
                return False
            if kind is TextDelta and not only.logprobs:  # (a read of one token: a real model's usual read)
                if only.text:
                    self._text.append(only.text)
                    self.writer.text_deltas([only.text])
                return False
        take = self.take
        run: list[str] = []
        for chunk in chunks:
            if not self._first:  # (the first goes through take: it reports the round's first chunk)
                kind = chunk.__class__
                if kind is TextRun:
                    run += chunk.texts
                    continue
                if kind is TextDelta and not chunk.logprobs:
                    if chunk.text:
                        run.append(chunk.text)
                    continue
            if run:
                self._text.extend(run)
                self.writer.text_deltas(run)
                run = []
            if take(chunk):
                return True
        if run:
            self._text.extend(run)
            self.writer.text_deltas(run)
        return False

    def take_read(self, chunks: list[Any]) -> bool:
        """The round's :data:`~respstream.server.upstream.base.ReadSink`: a read applied from the upstream
        connection's data callback when it is plain text (a :class:`TextRun`, text deltas without logprobs), as
        :meth:`take_all` would; False for anything else and for the round's first read (that one reports the
        round's first chunk, in the pipeline's task)."""
        if self._first:
            return False
        if len(chunks) == 1:  # (a read of one token, or one run: nearly every read)
            only = chunks[0]
            kind = only.__class__
            if kind is TextRun:
                texts = only.texts
            elif kind is TextDelta and not only.logprobs:
                if not only.text:
                    return True
                texts = [only.text]
            else:
                return False
            self._text.extend(texts)
            self.writer.text_deltas(texts)
            return True
        for chunk in chunks:
            kind = chunk.__class__
            if kind is not TextRun and (kind is not TextDelta or chunk.logprobs):
                return False
        self.take_all(chunks)
        return True

    def result(self, offer_tools: bool) -> RoundResult:
        calls = self._calls
        return RoundResult(self.finish, "".join(self._text), [calls[i] for i in sorted(calls)] if offer_tools else [])
