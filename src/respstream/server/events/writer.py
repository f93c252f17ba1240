"""The only way the gateway emits a stream event.

How this works: one :class:`ResponseWriter` per response owns the sequence counter (0, then +1), the Response
snapshot and the terminal. Its methods are item-level (``text_delta``, ``close_message``, ``client_tool_call``,
``server_tool_started``...), so the order the protocol demands — ``response.created`` first, ``output_item.added``
before any event of its item, ``*.done`` after the deltas, exactly one terminal, last — holds by construction: a
text delta opens its message item and part if none is open; closing a response closes what is still open.

Each event is turned into JSON exactly once (a byte template for the hot text deltas: one
:class:`~respstream.server.store.base.DeltaTemplate` per content part, so a delta costs one encode of its
string), checked by the protocol's incremental rule checker when one is installed, and queued; ``flush()`` appends
the queued batch to the store in one call, which wakes every reader once per batch. A checker violation puts the
writer in an error state: it ends the stream with an ``internal_error`` terminal and refuses further events
(:class:`WriterClosed`). An event larger than ``max_event_bytes`` is never sent: the stream ends with
``event_too_large`` instead (a terminal that would itself be too large carries the Response without its output).

The checker reads each of the writer's own events as built (``typed_events.py``), not a decode of the bytes just
encoded; what is emitted is not edited afterwards (items, parts and the Response are replaced), so both agree. What
other modules hand in (``emit_event``, ``add_output_item``) is decoded for the checker, as before.

Frames are built by :func:`frame` when sending: ``id: <seq>\\nevent: message|<type>\\ndata: <json>\\n\\n``.

Hot path (a text delta to the part that is open, the previous event a clean delta to the same part; the deltas are
in ``writer_deltas.py``): the checker's :meth:`~respstream.protocol.rules.RuleChecker.check_text_delta` keeps its
state and its assembler's exactly as ``check(OutputTextDelta(...))`` would, without building the event; into the
memory store the delta goes as a compact :class:`~respstream.server.store.base.DeltaEntry` (its JSON string and the
part's template, not the event's JSON). A run of such deltas (what one upstream read held) goes through
``text_deltas`` in one step: the same events and bytes as one call each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from respstream.protocol.events import decode_event
from respstream.protocol.rules import RuleChecker
from respstream.server.events.content_parts import OpenItem, OpenPart, closing_events, part_object
from respstream.server.events.dialects import Dialect
from respstream.server.events.frames import (
    ERROR_CODES,
    flat_error,
    frame,
    reader_terminal_data,
    reader_terminal_frame,
    terminal_outcome,
)
from respstream.server.events.response_object import mark_completed
from respstream.server.events.typed_events import typed_event
from respstream.server.events.writer_deltas import DeltaWriting, WriterClosed
from respstream.server.events.writer_store import LogFlushing, ResponseDeleted
from respstream.server.events.writer_tools import ToolCallItems
from respstream.server.store.base import DeltaTemplate, Entry, LogEntry, ResponseRecord, Store
from respstream.server.upstream.base import Usage

# frame, reader_terminal_* and terminal_outcome live in frames.py; re-exported for the callers that import them here.
__all__ = ["ERROR_CODES", "REPAIRS_FIELD", "ResponseDeleted", "ResponseWriter", "WriterClosed", "frame",
           "reader_terminal_data", "reader_terminal_frame", "terminal_outcome"]

_encode = msgspec.json.Encoder().encode
# The Response extension field that reports what the gateway repaired in a native Responses upstream's stream.
REPAIRS_FIELD = "respstream:repairs"


def usage_object(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


class ResponseWriter(DeltaWriting, ToolCallItems, LogFlushing):
    """Emits one response's events. Not thread-safe; one task drives it (the pipeline)."""

    def __init__(
        self,
        record: ResponseRecord,
        *,
        dialect: Dialect,
        store: Store,
        response: dict[str, Any],
        check: bool = True,
        on_flush: Callable[[int], None] | None = None,
        max_event_bytes: int = 16 << 20,
        routing_event: bool = True,
    ) -> None:
        self.record = record
        self._routing_event = routing_event  # False: the routing decision shows only as the Response's `model`
        self.dialect = dialect
        self.response = response  # the Response snapshot (output filled as items finish)
        self._store = store
        self._checker = RuleChecker(dialect=dialect.name, keep=False) if check else None
        self._on_flush = on_flush
        self._max_event_bytes = max_event_bytes
        self._seq = 0
        self._pending: list[Entry] = []
        self._closed = False
        self._item: OpenItem | None = None
        self._output: list[dict[str, Any]] = response.setdefault("output", [])
        self._tool_summary: list[dict[str, Any]] = []
        self._append_nowait: Callable[[str, list[Entry]], None] | None = getattr(store, "append_nowait", None)
        # Compact delta entries only go to a store that keeps them as they are (the memory store).
        self._compact = self._append_nowait is not None
        # A store taking the terminal's Response as encoded bytes (memory; see writer_store.terminal_response_json).
        self._update_encoded: Callable[[ResponseRecord, bytes], Awaitable[None]] | None = getattr(
            store, "update_encoded", None)
        self._terminal_response: dict[str, Any] | None = None  # the Response the terminal event carries
        self._soon: asyncio.Handle | None = None
        self._inflight: asyncio.Future[None] | None = None
        self.repairs: dict[str, int] = {}  # see note_repairs()

    # -- low level -------------------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def next_sequence_number(self) -> int:
        return self._seq

    def _emit(self, event_type: str, fields: dict[str, Any], *, terminal: bool = False, own: bool = True) -> None:
        """Encode and queue one event. ``own``: the fields are the writer's own making (JSON types, never edited once
        emitted); False (what other modules hand in, an upstream's fields among them): the checker reads a decode of
        the bytes, so a value of the wrong JSON type is reported as the client's parser would see it."""
        if self._closed:
            raise WriterClosed(f"{event_type} after the terminal event")
        # A copy of exactly its size: the encoder's buffer is up to 1.5x the bytes, and the memory store keeps (and
        # charges) the event for the response's lifetime (store/memory.py).
        event = {"type": event_type, "sequence_number": self._seq, **fields}
        data = bytes(memoryview(_encode(event)))
        if terminal:  # (only a terminal of the Response alone: writer_store.py cuts it out of these bytes)
            self._terminal_response = fields.get("response") if len(fields) == 1 else None
        # The checker reads the event as built (see typed_events.py), not a decode of the bytes just made.
        self._queue(event_type, data, terminal, typed_event(event) if own and self._checker is not None else None)

    def _queue(self, event_type: str, data: bytes, terminal: bool, event: Any = None) -> None:
        self._admit(event_type, data, event)
        self._pending.append(LogEntry(self._seq, event_type, data, terminal))
        self._seq += 1
        if terminal:
            self._closed = True

    def _admit(self, event_type: str, data: bytes, event: Any) -> None:
        """Refuse an event over ``max_event_bytes`` or one the checker objects to (the stream ends with an error)."""
        if len(data) > self._max_event_bytes:
            message = (f"event #{self._seq} ({event_type}) would be {len(data)} bytes, over the "
                       f"{self._max_event_bytes}-byte limit (max_event_bytes)")
            self.fail("event_too_large", message)
            raise WriterClosed(message)
        if self._checker is not None:
            problems = self._checker.check(decode_event(data) if event is None else event)
            if problems:
                first = f"{problems[0].code}: {problems[0].message}"
                self._break(f"writer rule violation at {event_type} #{self._seq}: {first}")
                raise WriterClosed(first)

    def _break(self, message: str) -> None:
        """Error state: end the stream with ``internal_error`` without consulting the checker again."""
        self._checker = None
        self.fail("internal_error", message)

    @classmethod
    def continuing(cls, record: ResponseRecord, *, dialect: Dialect, store: Store, next_sequence_number: int
                   ) -> ResponseWriter:
        """A writer for the end of a log some other writer started (no rule checks: it did not see the start).
        Used to cancel a response generating on another gateway instance."""
        writer = cls(record, dialect=dialect, store=store, response=dict(record.response), check=False)
        writer._seq = next_sequence_number
        return writer

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def start(self, *, preamble: bool = True) -> None:
        """``response.created`` (and ``response.queued`` / ``response.in_progress`` in the openai dialect, unless
        ``preamble`` is False: a WebSocket prewarm is ``response.created`` then ``response.completed``)."""
        self._emit("response.created", {"response": self._snapshot()})
        if self.dialect.lifecycle_preamble and preamble:
            if self.response.get("status") == "queued":
                self._emit("response.queued", {"response": self._snapshot()})
            # The record stays `queued` until the runner starts (mark_in_progress): what a background POST returns.
            self._emit("response.in_progress", {"response": {**self._snapshot(), "status": "in_progress"}})

    def mark_in_progress(self) -> None:
        """A queued (background) response starts running; the record follows, no event in the platform dialect."""
        self.response["status"] = "in_progress"
        self.record.status = "in_progress"

    def routing(self, *, model_id: str, category: str, source: str, reasoning: str) -> None:
        self.response["model"] = model_id
        if not self._routing_event:
            return
        self._emit(
            self.dialect.extension("response.routing.completed"),
            {"model_id": model_id, "category": category, "source": source, "reasoning": reasoning},
        )

    def _snapshot(self) -> dict[str, Any]:
        # Lifecycle events before the terminal carry the response without output (as OpenAI does).
        return {**self.response, "output": []}

    # -- message items ---------------------------------------------------------------------------------------------
    def _open_item(self, kind: str) -> OpenItem:
        if self._item is not None and self._item.kind != kind:
            self._close_current_item()
        if self._item is None:
            prefix = "msg" if kind == "message" else "rs"
            item = OpenItem(kind, self.dialect.new_id(prefix), len(self._output))
            shell: dict[str, Any]
            if kind == "message":
                shell = {"id": item.id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            else:
                shell = {"id": item.id, "type": "reasoning", "status": "in_progress", "summary": [], "content": []}
            self._output.append(shell)
            self._emit("response.output_item.added", {"output_index": item.output_index, "item": shell})
            self._item = item
        return self._item

    def _open_part(self, item: OpenItem, kind: str) -> OpenPart:
        part = item.part
        if part is not None and part.kind != kind:
            self._close_part(item)
            part = None
        if part is None:
            part = OpenPart(kind, len(item.content))
            self._emit("response.content_part.added", {**self._where(item, part), "part": part_object(kind, "")})
            item.part = part
            # The same bytes the generic encoder makes for this part's deltas, around the delta string.
            name = self.dialect.reasoning_event if kind == "reasoning_text" else f"response.{kind}"
            item.template = DeltaTemplate(
                f"{name}.delta",
                b'{"type":"%b.delta","sequence_number":' % name.encode(),
                b',"item_id":%b,"output_index":%d,"content_index":%d,"delta":' % (
                    _encode(item.id), item.output_index, part.content_index),
                b',"logprobs":[]}' if kind == "output_text" else b"}",
            )
        return part

    @staticmethod
    def _where(item: OpenItem, part: OpenPart) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": item.output_index, "content_index": part.content_index}

    def _close_part(self, item: OpenItem, final_text: str | None = None, *, rewritten: bool = False,
                    annotations: list[dict[str, Any]] | None = None) -> None:
        part = item.part
        if part is None:
            return
        text = part.joined() if final_text is None else final_text
        events, done_part = closing_events(self.dialect, item, part, text, rewritten=rewritten,
                                           annotations=annotations)
        for event_type, fields in events:
            self._emit(event_type, fields)
        item.content.append(done_part)
        item.part = None

    def _close_current_item(self, *, status: str = "completed") -> None:
        item = self._item
        if item is None:
            return
        self._close_part(item)
        final = self._output[item.output_index]
        final = {**final, "content": item.content, "status": status}
        self._output[item.output_index] = final
        self._emit("response.output_item.done", {"output_index": item.output_index, "item": final})
        self._item = None

    def close_message(self, final_text: str | None = None, *, status: str = "completed",
                      annotations: list[dict[str, Any]] | None = None) -> None:
        """Close the open item. ``final_text`` replaces the streamed text (a rewrite): announced first.
        ``annotations`` (``url_citation``...) index into the final text; each is announced before its ``done``."""
        item = self._item
        if item is None:
            return
        if item.part is not None and item.part.kind == "output_text" and (final_text is not None or annotations):
            text = item.part.joined() if final_text is None else final_text
            self._close_part(item, text, rewritten=text != item.part.joined(), annotations=annotations)
        self._close_current_item(status=status)

    # -- repairs ---------------------------------------------------------------------------------------------------
    def note_repairs(self, repairs: dict[str, int] | None) -> None:
        """What was repaired in a native Responses upstream's stream (violation code -> count), added up over the
        response's rounds. Shown as the extension field ``respstream:repairs`` of the Response (terminal event,
        ``GET``); absent when no round came from such an upstream. ``None`` (another kind of upstream): nothing."""
        if repairs is None or self._closed:
            return
        total: dict[str, int] = dict(self.response.get(REPAIRS_FIELD) or {})
        for code, n in repairs.items():
            total[code] = total.get(code, 0) + n
        self.response[REPAIRS_FIELD] = dict(sorted(total.items()))
        self.repairs = self.response[REPAIRS_FIELD]

    # -- terminals -------------------------------------------------------------------------------------------------
    def complete(self, *, usage: Usage | None = None, incomplete_reason: str | None = None) -> None:
        """Close open items and end the response successfully (or incomplete: ``max_output_tokens``...)."""
        self._close_current_item(status="incomplete" if incomplete_reason else "completed")
        status = "incomplete" if incomplete_reason else "completed"
        now = time.time()
        self.response.update(
            status=status,
            usage=usage_object(usage),
            incomplete_details={"reason": incomplete_reason} if incomplete_reason else None,
            output_text=self.output_text(),
            tool_calls=self._tool_summary,
        )
        if status == "completed":
            mark_completed(self.response, self.dialect, now)
        self.record.status = status
        event_type = "response.incomplete" if incomplete_reason and self.dialect.separate_terminal_types else (
            "response.completed"
        )
        self._emit(event_type, {"response": self.response}, terminal=True)

    def fail(self, code: str, message: str) -> None:
        """End the response with an error ``code`` (``cancelled`` is a cancel). Open items get no ``done`` event;
        the terminal's output shows them as streamed so far."""
        if self._closed:
            return
        cancelled = code == "cancelled"
        status = "cancelled" if cancelled else "failed"
        self._snapshot_open_item()
        self._item = None
        self.response.update(status=status, error={"code": code, "message": message},
                             output_text=self.output_text(), tool_calls=self._tool_summary)
        self.record.status = status
        try:
            if not self.dialect.separate_terminal_types:
                self._emit("error", flat_error(code, message), terminal=True)
                return
            if not cancelled:
                err = {"type": ERROR_CODES.get(code, "server_error"), "code": code, "message": message,
                       "param": None}
                self._emit("error", {"error": err})
            self._emit("response.failed", {"response": self._fitting(self.response)}, terminal=True)
        except WriterClosed:
            pass  # a violation inside the failure path already ended the stream with internal_error

    def _snapshot_open_item(self) -> None:
        """An item still open at a failure goes into ``output`` with what was streamed of it (status
        ``incomplete``), so the terminal's output agrees with the deltas a client saw."""
        item = self._item
        if item is None:
            return
        content = list(item.content)
        if item.part is not None:
            content.append(part_object(item.part.kind, item.part.joined()))
        snapshot = {**self._output[item.output_index], "content": content, "status": "incomplete"}
        self._output[item.output_index] = snapshot

    def _fitting(self, response: dict[str, Any]) -> dict[str, Any]:
        """``response``, or a copy without its output when the terminal carrying it would exceed the limit."""
        if len(_encode(response)) + 256 <= self._max_event_bytes:
            return response
        return {**response, "output": [], "output_text": "", "tool_calls": []}

    def output_text(self) -> str:
        return "".join(
            part.get("text", "")
            for item in self._output
            if item.get("type") == "message"
            for part in item.get("content", [])
            if part.get("type") == "output_text"
        )

