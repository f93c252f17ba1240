"""Events in sequence order -> the canonical final response (DESIGN §2 "Assembler", §3 replay object).

How this works: :class:`Assembler` dispatches each event by class to a handler. This module handles the response's
lifecycle (created ... terminal, routing, rewrite), output items being added and done, and message content (text,
refusal, annotations); ``tool_items.py`` handles tool calls, hosted tools, reasoning and shell items; both store what
they learn in the items, parts and slots of ``output_items.py``. :meth:`Assembler.result` materialises it all into
an :class:`~respstream.protocol.assembled.AssembledResponse`. ``rules.py`` reports every irregularity; the assembler
only assembles, and never raises on stream content.

Final values are preferred in this order: the terminal response's ``output`` (or the platform's ``output_text``) >
``*.done`` events (the latest wins) > concatenated deltas. ``streamed_text`` keeps the deltas as a live UI showed them.
The first terminal event freezes the state; later events are counted but change nothing (``error`` directly
followed by ``response.failed`` is one terminal).
"""

from __future__ import annotations

from typing import Any, Final

from respstream.protocol import events as ev
from respstream.protocol.assembled import OUTCOMES, AssembledResponse, JSONObject, output_texts, tool_call_summary
from respstream.protocol.sequencer import Violation
from respstream.protocol.tool_items import ToolItems

__all__ = ["OUTCOMES", "AssembledResponse", "Assembler"]

_RESPONSE_STATUSES: Final = frozenset({"completed", "incomplete", "failed", "cancelled"})
_TERMINAL_KIND: Final[dict[str, str]] = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
    "error": "error",
}
_TABLES: dict[type[Any], dict[type[ev.Event], Any]] = {}  # per Assembler class: its dispatch table
_COMPACT_AT: Final = 256  # join a slot's chunks when it holds more than this many (bounded per-delta overhead)


class Assembler(ToolItems):
    """Consumes events in sequence order (``feed``) and builds the final response (``result``). Never raises on
    stream content: irregular streams are assembled as well as they can be, and ``rules.py`` reports them."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0
        self.last_sequence_number: int | None = None
        self.terminal: str | None = None  # type of the first terminal event
        self.rewritten = False
        self.routing: JSONObject | None = None
        self.streamed: list[str] = []
        self._streamed_mark = 0
        self._response: JSONObject | None = None
        self._response_id: str | None = None
        self._model: str | None = None
        self._usage: JSONObject | None = None
        self._incomplete: JSONObject | None = None
        self._terminal_response: JSONObject | None = None
        self._error_event: ev.ErrorEvent | None = None
        self._await_failed = False
        # Text-delta cache: the last (output_index, content_index) and its chunk list.
        self._c_oi: int = -1
        self._c_ci: int = -1
        self._c_chunks: list[str] = []
        self._n_chunks: list[str] = []  # see _on_text_delta
        table = _TABLES.get(self.__class__)
        if table is None:  # once per class: event class -> plain function (a bound-method table per response
            # cost more than the events of a short one)
            table = _TABLES[self.__class__] = {cls: getattr(handler, "__func__", handler)
                                               for cls, handler in ev.with_aliases(self._handlers()).items()}
        self._dispatch: dict[type[ev.Event], Any] = table

    def _handlers(self) -> dict[type[ev.Event], Any]:
        return {
            ev.OutputTextDelta: self._on_text_delta,
            ev.OutputTextDone: self._on_text_done,
            ev.ResponseCreated: self._on_response,
            ev.ResponseQueued: self._on_response,
            ev.ResponseInProgress: self._on_response,
            ev.ResponseCompleted: self._on_terminal_response,
            ev.ResponseIncomplete: self._on_terminal_response,
            ev.ResponseFailed: self._on_terminal_response,
            ev.ErrorEvent: self._on_error,
            ev.OutputItemAdded: self._on_item_added,
            ev.OutputItemDone: self._on_item_done,
            ev.ContentPartAdded: self._on_part_added,
            ev.ContentPartDone: self._on_part_done,
            ev.OutputTextAnnotationAdded: self._on_annotation,
            ev.RefusalDelta: self._on_refusal_delta,
            ev.RefusalDone: self._on_refusal_done,
            ev.RoutingCompleted: self._on_routing,
            ev.RewriteInProgress: self._on_rewrite,
            **self.tool_handlers(),
        }

    # --- feeding ------------------------------------------------------------------------------------------------

    def feed(self, event: ev.Event) -> None:
        """Apply one event (already in sequence order)."""
        self.events += 1
        seq = event.sequence_number
        if seq is not None:
            self.last_sequence_number = seq
        if self.terminal is not None:
            self._after_terminal(event)
            return
        handler = self._dispatch.get(event.__class__)
        if handler is not None:
            handler(self, event)

    def feed_text_delta(self, sequence_number: int, output_index: int, content_index: int, delta: str) -> bool:
        """``feed(OutputTextDelta(...))`` for a delta to the same part as the previous text delta, without the
        event: True when applied, False (nothing done) when it is not that case (then ``feed`` the event)."""
        if self.terminal is not None or output_index != self._c_oi or content_index != self._c_ci:
            return False
        self.events += 1
        self.last_sequence_number = sequence_number
        self._c_chunks.append(delta)
        self.streamed.append(delta)
        return True

    def feed_text_deltas(self, first_sequence_number: int, output_index: int, content_index: int,
                         deltas: list[str]) -> bool:
        """:meth:`feed_text_delta` for each of ``deltas`` (numbered from ``first_sequence_number``, one apart), in
        one step: True when applied, False (nothing done) when they are not deltas to the previous text delta's part."""
        if self.terminal is not None or output_index != self._c_oi or content_index != self._c_ci or not deltas:
            return False
        self.events += len(deltas)
        self.last_sequence_number = first_sequence_number + len(deltas) - 1
        self._c_chunks.extend(deltas)
        self.streamed.extend(deltas)
        return True

    def compact(self) -> None:
        """Join the deltas that arrived since the last call into one block per list, so a long stream costs about
        its text in memory, not a Python object per delta. Only the new tail is joined (never the whole text
        again), so the total cost stays linear. The lists keep their identity (callers may hold them)."""
        streamed = self.streamed
        if len(streamed) - self._streamed_mark > _COMPACT_AT:
            streamed[self._streamed_mark :] = ["".join(streamed[self._streamed_mark :])]
            self._streamed_mark += 1
        for slot in self._slots.values():
            chunks = slot.chunks
            if len(chunks) - slot.mark > _COMPACT_AT:
                chunks[slot.mark :] = ["".join(chunks[slot.mark :])]
                slot.mark += 1

    # --- result -------------------------------------------------------------------------------------------------

    def result(self, violations: list[Violation] | None = None) -> AssembledResponse:
        """The assembled response so far (call it after the last event; it is cheap enough to call now and then)."""
        terminal = self._terminal_response
        output: list[JSONObject] | None = None
        final_text: str | None = None
        if terminal is not None:
            t_output = terminal.get("output")
            if isinstance(t_output, list) and t_output and all(isinstance(i, dict) for i in t_output):
                output = t_output  # (the terminal's own output wins: nothing to materialize)
            t_text = terminal.get("output_text")
            if isinstance(t_text, str) and t_text:
                final_text = t_text
        if output is None:
            output = self.materialize()
        if final_text is None:
            final_text = "".join(output_texts(output, "output_text", "text"))
        refusals = output_texts(output, "refusal", "refusal")
        return AssembledResponse(
            status=self.status(),
            response_id=self._response_id,
            model=self._model,
            output_text=final_text,
            streamed_text="".join(self.streamed),
            refusal="".join(refusals) if refusals else None,
            output=output,
            tool_calls=[tool_call_summary(item) for item in output if item.get("type") == "function_call"],
            usage=self._usage,
            incomplete_details=self._incomplete,
            error=self._error(),
            events=self.events,
            last_sequence_number=self.last_sequence_number,
            violations=list(violations or ()),
            terminal_event=self.terminal,
            routing=self.routing,
            rewritten=self.rewritten,
            response=self._response,
        )

    def status(self) -> str:
        """The outcome (DESIGN §3): the terminal response's ``status`` wins over the event type when they disagree."""
        if self.terminal is None:
            return "truncated"
        error_event = self._error_event
        if error_event is not None and error_event.error_code == "cancelled":
            return "cancelled"
        terminal = self._terminal_response
        if terminal is not None:
            status = terminal.get("status")
            if isinstance(status, str) and status in _RESPONSE_STATUSES:
                return str(status)
            if error_event is not None:  # error + response.failed with an odd status: still a failure
                return "failed"
        return _TERMINAL_KIND[self.terminal]

    def _error(self) -> JSONObject | None:
        if self._error_event is not None:
            return {"code": self._error_event.error_code, "message": self._error_event.error_message}
        terminal = self._terminal_response
        err = terminal.get("error") if terminal is not None else None
        if isinstance(err, dict):
            return {"code": err.get("code"), "message": err.get("message")}
        return None

    # --- lifecycle ----------------------------------------------------------------------------------------------

    def _on_response(self, event: ev.ResponseEvent) -> None:
        response = event.response
        if response is None:
            return
        self._response = response
        rid = response.get("id")
        if isinstance(rid, str):
            self._response_id = rid
        model = response.get("model")
        if isinstance(model, str):
            self._model = model
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        details = response.get("incomplete_details")
        if isinstance(details, dict):
            self._incomplete = details

    def _on_terminal_response(self, event: ev.ResponseEvent) -> None:
        self.terminal = event.type
        self._on_response(event)
        self._terminal_response = event.response if event.response is not None else {}

    def _on_error(self, event: ev.ErrorEvent) -> None:
        self.terminal = "error"
        self._error_event = event
        self._await_failed = True

    def _after_terminal(self, event: ev.Event) -> None:
        if event.type in ev.AFTER_TERMINAL_TYPES:
            return  # a notice after the terminal (rate limits...): an `error` may still be followed by its failed
        if self._await_failed and isinstance(event, ev.ResponseFailed):
            # `error` directly followed by `response.failed`: one terminal, a failure.
            self._on_terminal_response(event)
        self._await_failed = False

    def _on_routing(self, event: ev.RoutingCompleted) -> None:
        self.routing = {
            k: v
            for k, v in (
                ("model_id", event.model_id),
                ("category", event.category),
                ("source", event.source),
                ("reasoning", event.reasoning),
            )
            if v is not None
        }

    def _on_rewrite(self, event: ev.RewriteInProgress) -> None:
        self.rewritten = True

    # --- items and parts ----------------------------------------------------------------------------------------

    def _on_item_added(self, event: ev.OutputItemAdded) -> None:
        src = event.item or {}
        iid = src.get("id")
        iid = iid if isinstance(iid, str) else None
        kind = src.get("type")
        oi = self._item(event.output_index, iid, kind if isinstance(kind, str) else "unknown")
        self._merge_item(oi, src)

    def _on_item_done(self, event: ev.OutputItemDone) -> None:
        src = event.item or {}
        iid = src.get("id")
        iid = iid if isinstance(iid, str) else None
        kind = src.get("type")
        oi = self._item(event.output_index, iid, kind if isinstance(kind, str) else "unknown")
        self._merge_item(oi, src)
        # The done item is final: its strings override deltas and earlier *.done values.
        content = src.get("content")
        if isinstance(content, list):
            for ci, part in enumerate(content):
                if isinstance(part, dict):
                    self._set_part(oi, ci, part)
        summary = src.get("summary")
        if isinstance(summary, list):
            for si, part in enumerate(summary):
                if isinstance(part, dict):
                    self._set_summary(oi, si, part)
        for name in ("arguments", "input", "code"):
            value = src.get(name)
            if isinstance(value, str):
                self._slot((oi, name)).final = value

    def _on_part_added(self, event: ev.ContentPartAdded) -> None:
        # The seed opens a message with content_part.added alone: create the message if needed.
        oi = self._item(event.output_index, event.item_id, "message")
        ci = event.content_index if event.content_index is not None else 0
        self._set_part(oi, ci, event.part or {"type": "output_text"})

    def _on_part_done(self, event: ev.ContentPartDone) -> None:
        oi = self._item(event.output_index, event.item_id, "message")
        ci = event.content_index if event.content_index is not None else 0
        self._set_part(oi, ci, event.part or {"type": "output_text"})

    def _on_text_delta(self, event: ev.OutputTextDelta) -> None:
        delta = event.delta
        if delta is None:
            return
        oi = event.output_index
        ci = event.content_index
        if oi == self._c_oi and ci == self._c_ci:
            self._c_chunks.append(delta)
            self.streamed.append(delta)
            return
        oi = self._item(oi, event.item_id, "message")
        ci = ci if ci is not None else 0
        self._part(oi, ci, "output_text")
        chunks = self._slot((oi, ci)).chunks
        chunks.append(delta)
        self.streamed.append(delta)
        if event.output_index is not None and event.content_index is not None:
            self._c_oi, self._c_ci, self._c_chunks = oi, ci, chunks
        else:
            # Located by item_id alone (llama.cpp sends no indices): the part it resolved to, for StreamCore's inlined
            # path (valid only for the very next event, a text delta with the same item_id and no indices either).
            self._n_chunks = chunks

    def _on_text_done(self, event: ev.OutputTextDone) -> None:
        oi = self._item(event.output_index, event.item_id, "message")
        ci = event.content_index if event.content_index is not None else 0
        self._part(oi, ci, "output_text")
        if event.text is not None:
            self._slot((oi, ci)).final = event.text

    def _on_annotation(self, event: ev.OutputTextAnnotationAdded) -> None:
        if event.annotation is None:
            return
        oi = self._item(event.output_index, event.item_id, "message")
        ci = event.content_index if event.content_index is not None else 0
        annotations = self._part(oi, ci, "output_text").setdefault("annotations", [])
        index = event.annotation_index
        if index is not None and 0 <= index < len(annotations):
            annotations[index] = event.annotation
        else:
            annotations.append(event.annotation)

    def _on_refusal_delta(self, event: ev.RefusalDelta) -> None:
        if event.delta is None:
            return
        oi = self._item(event.output_index, event.item_id, "message")
        ci = event.content_index if event.content_index is not None else 0
        self._part(oi, ci, "refusal")
        self._slot((oi, ci)).chunks.append(event.delta)

    def _on_refusal_done(self, event: ev.RefusalDone) -> None:
        oi = self._item(event.output_index, event.item_id, "message")
        ci = event.content_index if event.content_index is not None else 0
        self._part(oi, ci, "refusal")
        if event.refusal is not None:
            self._slot((oi, ci)).final = event.refusal
