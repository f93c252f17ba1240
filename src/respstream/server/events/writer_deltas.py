"""Text, reasoning and refusal deltas of a response: the writer's hot path (a mixin of
:class:`~respstream.server.events.writer.ResponseWriter`, sharing its state).

How this works: a delta goes to the message (or reasoning) item and content part that is open, opening them first if
needed. Each part has a byte template (:class:`~respstream.server.store.base.DeltaTemplate`), so a delta costs one
encode of its string; the rule checker's ``check_text_delta`` keeps its state as ``check`` of the event would,
without building it. A run of plain text deltas (what one upstream read held) goes through :meth:`text_deltas` in one
step: the same events, bytes, checks and state as one :meth:`text_delta` call each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any

import msgspec

from respstream.protocol.events import Event, OutputTextDelta
from respstream.protocol.rules import RuleChecker
from respstream.server.events.content_parts import OpenItem, OpenPart
from respstream.server.events.typed_events import typed_event
from respstream.server.store.base import DeltaEntry, Entry, LogEntry

__all__ = ["DeltaWriting", "WriterClosed"]

_encode = msgspec.json.Encoder().encode


class WriterClosed(RuntimeError):
    """An event was offered after the terminal, or after a rule violation ended the stream."""


class DeltaWriting:
    """The delta half of the writer (a mixin: it shares the writer's state)."""

    _closed: bool
    _item: OpenItem | None
    _checker: RuleChecker | None
    _max_event_bytes: int
    _seq: int
    _pending: list[Entry]
    _compact: bool
    _soon: asyncio.Handle | None
    _append_nowait: Callable[[str, list[Entry]], None] | None

    if TYPE_CHECKING:
        def _open_item(self, kind: str) -> OpenItem: ...
        def _open_part(self, item: OpenItem, kind: str) -> OpenPart: ...
        def _admit(self, event_type: str, data: bytes, event: Any) -> None: ...
        def _emit(self, event_type: str, fields: dict[str, Any], *, terminal: bool = False,
                  own: bool = True) -> None: ...
        def _flush_now(self) -> None: ...
        @staticmethod
        def _where(item: OpenItem, part: OpenPart) -> dict[str, Any]: ...

    def _delta(self, item_kind: str, part_kind: str, delta: str) -> None:
        if self._closed:
            raise WriterClosed(f"{part_kind} delta after the terminal event")
        item = self._item if self._item is not None and self._item.kind == item_kind else self._open_item(item_kind)
        part = item.part if item.part is not None and item.part.kind == part_kind else self._open_part(item, part_kind)
        template = item.template
        assert template is not None  # set with the part
        seq = self._seq
        part.parts.append(delta)  # before the checks, as the failure path's snapshot has always included it
        piece = _encode(delta)  # the one encode: the template has the rest of the event's bytes
        checker = self._checker
        # Fast path: surely under the size limit (+20: the sequence number's digits) and, when checking, a delta the
        # checker has just seen the like of (same part, clean): it updates its state without the event object.
        if template.fixed_len + len(piece) + 20 > self._max_event_bytes or (
            checker is not None
            and not (part_kind == "output_text"
                     and checker.check_text_delta(seq, item.id, item.output_index, part.content_index, delta))
        ):
            typed: Event | None = None
            if checker is not None:  # typed directly: no decode of our own bytes (typed_events.py)
                if part_kind == "output_text":
                    typed = OutputTextDelta(sequence_number=seq, item_id=item.id, output_index=item.output_index,
                                            content_index=part.content_index, delta=delta, logprobs=[])
                else:  # refusal and reasoning deltas (a reasoning model's many): no fast path in the checker
                    typed = typed_event({"type": template.type, "sequence_number": seq, "item_id": item.id,
                                         "output_index": item.output_index, "content_index": part.content_index,
                                         "delta": delta})
            self._admit(template.type, template.data_fmt % (seq, piece), typed)
        self._pending.append(DeltaEntry(seq, piece, template) if self._compact
                             else LogEntry(seq, template.type, template.data_fmt % (seq, piece)))
        self._seq = seq + 1
        if self._soon is None and self._append_nowait is not None:
            self._soon = asyncio.get_running_loop().call_soon(self._flush_now)

    def text_delta(self, delta: str, logprobs: list[Any] | None = None) -> None:
        if logprobs:
            self._logprobs_delta(delta, logprobs)
            return
        self._delta("message", "output_text", delta)

    def text_deltas(self, deltas: list[str]) -> None:
        """:meth:`text_delta` for each of ``deltas`` in order (no logprobs): the same events, bytes, checks and
        state, with the run done in one step (one encode each, one append for all); when the part is not open yet,
        the run after the first delta (which opens it)."""
        if not deltas:
            return
        item = self._item
        part = None if item is None or item.kind != "message" else item.part
        if self._closed or part is None or part.kind != "output_text":
            # The part is not open yet (or the writer is closed: _delta raises): the first delta opens it.
            self._delta("message", "output_text", deltas[0])
            rest = deltas[1:]
            if not rest:
                return
            item = self._item
            assert item is not None and item.part is not None  # opened by _delta
            part = item.part
        else:
            assert item is not None  # (it has the part)
            rest = deltas  # the part is open: the whole run in one step (the checker says whether it may)
            if self._soon is None and self._append_nowait is not None:
                self._soon = asyncio.get_running_loop().call_soon(self._flush_now)
        template = item.template
        assert template is not None  # set with the part
        seq = self._seq
        checker = self._checker
        # Surely under the size limit: a character is at most 6 bytes of JSON (\u escape), plus the quotes and the
        # sequence number's digits. Else (a huge delta) each takes the exact path, as does a checker that objects.
        longest = len(rest[0]) if len(rest) == 1 else max(map(len, rest))
        if template.fixed_len + 6 * longest + 22 > self._max_event_bytes or (
            checker is not None
            and not checker.check_text_deltas(seq, item.id, item.output_index, part.content_index, rest)
        ):
            for delta in rest:
                self._delta("message", "output_text", delta)
            return
        part.parts.extend(rest)
        if self._compact:
            if len(rest) == 1:  # (a read of one token: a real model's usual read)
                self._pending.append(DeltaEntry(seq, _encode(rest[0]), template))
            else:  # (map, not a comprehension: no Python step a delta; faster from about ten deltas on)
                self._pending.extend(map(DeltaEntry, range(seq, seq + len(rest)), map(_encode, rest),
                                         repeat(template)))
        else:
            fmt, kind = template.data_fmt, template.type
            self._pending.extend([LogEntry(n, kind, fmt % (n, _encode(d))) for n, d in enumerate(rest, seq)])
        self._seq = seq + len(rest)

    def _logprobs_delta(self, delta: str, logprobs: list[Any]) -> None:
        """A text delta with token logprobs (only when the request asked for them): encoded whole, not from the
        part's byte template; the part's ``done`` and its final content carry all of them."""
        if self._closed:
            raise WriterClosed("output_text delta after the terminal event")
        item = self._item if self._item is not None and self._item.kind == "message" else self._open_item("message")
        part = item.part if item.part is not None and item.part.kind == "output_text" else self._open_part(
            item, "output_text")
        part.parts.append(delta)
        part.logprobs.extend(logprobs)
        self._emit("response.output_text.delta", {**self._where(item, part), "delta": delta, "logprobs": logprobs})
        if self._soon is None and self._append_nowait is not None:
            self._soon = asyncio.get_running_loop().call_soon(self._flush_now)

    def refusal_delta(self, delta: str) -> None:
        self._delta("message", "refusal", delta)

    def reasoning_delta(self, delta: str) -> None:
        self._delta("reasoning", "reasoning_text", delta)

    @property
    def open_message_text(self) -> str | None:
        """The streamed text of the open message's current output_text part (what a rewrite pass would change)."""
        item = self._item
        if item is None or item.kind != "message" or item.part is None or item.part.kind != "output_text":
            return None
        return item.part.joined()
