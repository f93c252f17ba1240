"""Events in sequence order -> the canonical final response (DESIGN §2 "Assembler", §3 replay object).

How this works: output items live in ``_items`` keyed by ``output_index`` (a dict, so a hostile index cannot make us
allocate a huge list). Every streamed string (a text or refusal part, a reasoning summary or text part, function /
MCP arguments, custom tool input, interpreter code, a shell command) is a :class:`_Slot`: the deltas as they came plus
the last ``*.done`` value. A slot's value is its final value when one arrived, else its deltas joined. Item metadata
(ids, names, statuses, annotations, hosted-tool fields) is merged from ``output_item.added``, the part events and
``output_item.done``. :meth:`Assembler.result` materialises all of it into an :class:`AssembledResponse`.

Where the item or part is located: ``(output_index, content_index)`` when present (the seed's deltas have no
``item_id``); when an index is missing, the ``item_id`` is looked up; when even that is unknown a placeholder item is
created, so nothing that arrived is lost. ``rules.py`` reports every such irregularity; the assembler only assembles.

Final values are preferred in this order: the terminal response's ``output`` (or the platform's ``output_text``) >
``*.done`` events (the latest wins) > concatenated deltas. ``streamed_text`` keeps the deltas as a live UI showed them.
The first terminal event freezes the state; later events are counted but change nothing (``error`` directly
followed by ``response.failed`` is one terminal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from respstream.protocol import events as ev
from respstream.protocol.sequencer import Violation

__all__ = ["OUTCOMES", "AssembledResponse", "Assembler"]

JSONObject = dict[str, Any]
OUTCOMES: Final = ("completed", "incomplete", "failed", "error", "cancelled", "truncated")
_RESPONSE_STATUSES: Final = frozenset({"completed", "incomplete", "failed", "cancelled"})
_TERMINAL_KIND: Final[dict[str, str]] = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
    "error": "error",
}
# Hosted-tool status events -> (item type of a placeholder, status they set).
_STATUS_EVENTS: Final[dict[type[ev.Event], tuple[str, str | None]]] = {
    ev.WebSearchCallInProgress: ("web_search_call", "in_progress"),
    ev.WebSearchCallSearching: ("web_search_call", "searching"),
    ev.WebSearchCallCompleted: ("web_search_call", "completed"),
    ev.FileSearchCallInProgress: ("file_search_call", "in_progress"),
    ev.FileSearchCallSearching: ("file_search_call", "searching"),
    ev.FileSearchCallCompleted: ("file_search_call", "completed"),
    ev.CodeInterpreterCallInProgress: ("code_interpreter_call", "in_progress"),
    ev.CodeInterpreterCallInterpreting: ("code_interpreter_call", "interpreting"),
    ev.CodeInterpreterCallCompleted: ("code_interpreter_call", "completed"),
    ev.ImageGenerationCallInProgress: ("image_generation_call", "in_progress"),
    ev.ImageGenerationCallGenerating: ("image_generation_call", "generating"),
    ev.ImageGenerationCallCompleted: ("image_generation_call", "completed"),
    ev.McpCallInProgress: ("mcp_call", "in_progress"),
    ev.McpCallCompleted: ("mcp_call", "completed"),
    ev.McpCallFailed: ("mcp_call", "failed"),
    # mcp_list_tools items have no status field in the API; the events only say where we are.
    ev.McpListToolsInProgress: ("mcp_list_tools", None),
    ev.McpListToolsCompleted: ("mcp_list_tools", None),
    ev.McpListToolsFailed: ("mcp_list_tools", None),
}
_COMPACT_AT: Final = 256  # join a slot's chunks when it holds more than this many (bounded per-delta overhead)


class _Slot:
    """One streamed string: its deltas and its latest ``*.done`` value."""

    __slots__ = ("chunks", "final", "mark")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.final: str | None = None
        self.mark = 0  # chunks[:mark] are already-joined blocks (see Assembler.compact)

    def value(self) -> str:
        return self.final if self.final is not None else "".join(self.chunks)

    def streamed(self) -> str | None:
        """The deltas joined, or None when no delta arrived."""
        return "".join(self.chunks) if self.chunks else None


@dataclass(slots=True)
class AssembledResponse:
    """The assembled outcome of one stream; ``to_json()`` is exactly the ``replay --json`` object (DESIGN §3).

    ``status`` is one of :data:`OUTCOMES`; before a terminal event arrives it is ``"truncated"``.
    """

    status: str
    response_id: str | None
    model: str | None
    output_text: str
    streamed_text: str
    refusal: str | None
    output: list[JSONObject]
    tool_calls: list[JSONObject]
    usage: JSONObject | None
    incomplete_details: JSONObject | None
    error: JSONObject | None
    events: int
    last_sequence_number: int | None
    violations: list[Violation] = field(default_factory=list)
    terminal_event: str | None = None
    routing: JSONObject | None = None
    rewritten: bool = False
    response: JSONObject | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "status": self.status,
            "response_id": self.response_id,
            "model": self.model,
            "output_text": self.output_text,
            "streamed_text": self.streamed_text,
            "refusal": self.refusal,
            "output": self.output,
            "tool_calls": self.tool_calls,
            "usage": self.usage,
            "incomplete_details": self.incomplete_details,
            "error": self.error,
            "events": self.events,
            "last_sequence_number": self.last_sequence_number,
            "violations": [v.to_json() for v in self.violations],
            "terminal_event": self.terminal_event,
            "routing": self.routing,
            "rewritten": self.rewritten,
        }


class Assembler:
    """Consumes events in sequence order (``feed``) and builds the final response (``result``). Never raises on
    stream content: irregular streams are assembled as well as they can be, and ``rules.py`` reports them."""

    def __init__(self) -> None:
        self.events = 0
        self.last_sequence_number: int | None = None
        self.terminal: str | None = None  # type of the first terminal event
        self.rewritten = False
        self.routing: JSONObject | None = None
        self._items: dict[int, JSONObject] = {}
        self._by_id: dict[str | None, int] = {}
        self._parts: dict[tuple[int, int], JSONObject] = {}
        self._part_index: dict[int, set[int]] = {}
        self._summaries: dict[tuple[int, int], JSONObject] = {}
        self._summary_index: dict[int, set[int]] = {}
        self._commands: dict[int, set[int]] = {}
        self._slots: dict[tuple[int, Any], _Slot] = {}
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
        self._dispatch: dict[type[ev.Event], Any] = {
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
            ev.FunctionCallArgumentsDelta: self._on_args_delta,
            ev.FunctionCallArgumentsDone: self._on_args_done,
            ev.CustomToolCallInputDelta: self._on_input_delta,
            ev.CustomToolCallInputDone: self._on_input_done,
            ev.ReasoningSummaryPartAdded: self._on_summary_part,
            ev.ReasoningSummaryPartDone: self._on_summary_part,
            ev.ReasoningSummaryTextDelta: self._on_summary_delta,
            ev.ReasoningSummaryTextDone: self._on_summary_done,
            ev.ReasoningTextDelta: self._on_reasoning_delta,
            ev.ReasoningTextDone: self._on_reasoning_done,
            ev.CodeInterpreterCallCodeDelta: self._on_code_delta,
            ev.CodeInterpreterCallCodeDone: self._on_code_done,
            ev.ImageGenerationCallPartialImage: self._on_partial_image,
            ev.McpCallArgumentsDelta: self._on_mcp_args_delta,
            ev.McpCallArgumentsDone: self._on_mcp_args_done,
            ev.ShellCallCommandAdded: self._on_command_added,
            ev.ShellCallCommandDelta: self._on_command_delta,
            ev.ShellCallCommandDone: self._on_command_done,
            ev.ShellCallOutputContentDelta: self._on_shell_output_delta,
            ev.ShellCallOutputContentDone: self._on_shell_output_done,
            ev.RoutingCompleted: self._on_routing,
            ev.RewriteInProgress: self._on_rewrite,
        }
        for cls in _STATUS_EVENTS:
            self._dispatch[cls] = self._on_status

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
            handler(event)

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

    # --- queries used by rules.py -------------------------------------------------------------------------------

    def streamed_value(self, key: tuple[int, Any]) -> str | None:
        """The deltas of one slot joined (None when none arrived). Keys: ``(oi, ci)`` for content parts,
        ``(oi, "arguments")``, ``(oi, "input")``, ``(oi, "code")``, ``(oi, ("summary", si))``."""
        slot = self._slots.get(key)
        return None if slot is None else slot.streamed()

    def resolve_index(self, output_index: int | None, item_id: str | None) -> int | None:
        """The output index an event refers to: its own, else the one of its ``item_id``, else None."""
        if output_index is not None:
            return output_index
        return self._by_id.get(item_id)

    def next_index(self) -> int:
        """The output index a new item without one would get."""
        return max(self._items, default=-1) + 1

    def materialize(self) -> list[JSONObject]:
        """The output items as assembled from the events (not from the terminal response), in output order."""
        return [self.materialize_item(oi) for oi in sorted(self._items)]

    # --- result -------------------------------------------------------------------------------------------------

    def result(self, violations: list[Violation] | None = None) -> AssembledResponse:
        """The assembled response so far (call it after the last event; it is cheap enough to call now and then)."""
        terminal = self._terminal_response
        assembled = self.materialize()
        output = assembled
        final_text: str | None = None
        if terminal is not None:
            t_output = terminal.get("output")
            if isinstance(t_output, list) and t_output and all(isinstance(i, dict) for i in t_output):
                output = t_output
            t_text = terminal.get("output_text")
            if isinstance(t_text, str) and t_text:
                final_text = t_text
        if final_text is None:
            final_text = "".join(_texts(output, "output_text", "text"))
        refusals = _texts(output, "refusal", "refusal")
        return AssembledResponse(
            status=self.status(),
            response_id=self._response_id,
            model=self._model,
            output_text=final_text,
            streamed_text="".join(self.streamed),
            refusal="".join(refusals) if refusals else None,
            output=output,
            tool_calls=[_tool_call(item) for item in output if item.get("type") == "function_call"],
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
            if status in _RESPONSE_STATUSES:
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

    # --- locating items and parts -------------------------------------------------------------------------------

    def _item(self, output_index: int | None, item_id: str | None, kind: str) -> int:
        """Find (or create a placeholder for) the item an event refers to; return its output index."""
        oi = output_index if output_index is not None else self._by_id.get(item_id)
        if oi is None:
            oi = max(self._items, default=-1) + 1
        if oi not in self._items:
            item: JSONObject = {"type": kind}
            if item_id is not None:
                item["id"] = item_id
            if kind == "message":
                item.update(status="in_progress", role="assistant", content=[])
            self._items[oi] = item
            self._by_id.setdefault(item_id, oi)
        return oi

    def _part(self, oi: int, ci: int, part_type: str) -> JSONObject:
        key = (oi, ci)
        part = self._parts.get(key)
        if part is None:
            part = {"type": part_type}
            if part_type == "output_text":
                part["annotations"] = []
            self._parts[key] = part
            self._part_index.setdefault(oi, set()).add(ci)
        return part

    def _slot(self, key: tuple[int, Any]) -> _Slot:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        return slot

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

    def _merge_item(self, oi: int, src: JSONObject) -> None:
        item = self._items[oi]
        for key, value in src.items():
            if key in ("content", "summary") and isinstance(value, list):
                item.setdefault(key, [])  # held per part, see _set_part / _set_summary
                continue
            if key in ("arguments", "input", "code") and isinstance(value, str):
                slot = self._slot((oi, key))
                if not slot.chunks and slot.final is None and value:
                    slot.final = value  # an item that arrives complete (arguments only in added/done)
                continue
            item[key] = value
        iid = item.get("id")
        if isinstance(iid, str):
            self._by_id[iid] = oi
        if "content" in src and isinstance(src["content"], list):
            for ci, part in enumerate(src["content"]):
                if isinstance(part, dict) and (oi, ci) not in self._parts:
                    self._set_part(oi, ci, part)

    def _set_part(self, oi: int, ci: int, src: JSONObject) -> None:
        part_type = src.get("type")
        part = self._part(oi, ci, part_type if isinstance(part_type, str) else "output_text")
        part.update({k: v for k, v in src.items() if k not in ("text", "refusal")})
        for name in ("text", "refusal"):
            value = src.get(name)
            if isinstance(value, str):
                slot = self._slot((oi, ci))
                # An empty opening part ({"text": ""}) must not override the deltas still to come.
                if value or slot.chunks or slot.final is not None:
                    slot.final = value

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

    # --- item-level strings -------------------------------------------------------------------------------------

    def _append(self, event: Any, kind: str, name: str) -> None:
        if event.delta is not None:
            oi = self._item(event.output_index, event.item_id, kind)
            self._slot((oi, name)).chunks.append(event.delta)

    def _finish(self, event: Any, kind: str, name: str, value: str | None) -> int:
        oi = self._item(event.output_index, event.item_id, kind)
        if value is not None:
            self._slot((oi, name)).final = value
        return oi

    def _on_args_delta(self, event: ev.FunctionCallArgumentsDelta) -> None:
        self._append(event, "function_call", "arguments")

    def _on_args_done(self, event: ev.FunctionCallArgumentsDone) -> None:
        oi = self._finish(event, "function_call", "arguments", event.arguments)
        if event.name is not None:
            self._items[oi]["name"] = event.name

    def _on_input_delta(self, event: ev.CustomToolCallInputDelta) -> None:
        self._append(event, "custom_tool_call", "input")

    def _on_input_done(self, event: ev.CustomToolCallInputDone) -> None:
        self._finish(event, "custom_tool_call", "input", event.input)

    def _on_code_delta(self, event: ev.CodeInterpreterCallCodeDelta) -> None:
        self._append(event, "code_interpreter_call", "code")

    def _on_code_done(self, event: ev.CodeInterpreterCallCodeDone) -> None:
        self._finish(event, "code_interpreter_call", "code", event.code)

    def _on_mcp_args_delta(self, event: ev.McpCallArgumentsDelta) -> None:
        self._append(event, "mcp_call", "arguments")

    def _on_mcp_args_done(self, event: ev.McpCallArgumentsDone) -> None:
        self._finish(event, "mcp_call", "arguments", event.arguments)

    def _on_status(self, event: Any) -> None:
        kind, status = _STATUS_EVENTS[event.__class__]
        oi = self._item(event.output_index, event.item_id, kind)
        if status is not None:
            self._items[oi]["status"] = status

    def _on_partial_image(self, event: ev.ImageGenerationCallPartialImage) -> None:
        oi = self._item(event.output_index, event.item_id, "image_generation_call")
        item = self._items[oi]
        item["status"] = "generating"
        if event.partial_image_b64 is not None and not isinstance(item.get("result"), str):
            # The latest partial stands in for the image until output_item.done carries the final `result`.
            item["partial_image_b64"] = event.partial_image_b64
            item["partial_image_index"] = event.partial_image_index

    # --- reasoning ----------------------------------------------------------------------------------------------

    def _set_summary(self, oi: int, si: int, src: JSONObject) -> None:
        key = (oi, si)
        part = self._summaries.get(key)
        if part is None:
            part = self._summaries[key] = {"type": "summary_text"}
            self._summary_index.setdefault(oi, set()).add(si)
        part.update({k: v for k, v in src.items() if k != "text"})
        text = src.get("text")
        slot = self._slot((oi, ("summary", si)))
        if isinstance(text, str) and (text or slot.chunks or slot.final is not None):
            slot.final = text

    def _on_summary_part(self, event: ev.ReasoningSummaryPartAdded | ev.ReasoningSummaryPartDone) -> None:
        oi = self._item(event.output_index, event.item_id, "reasoning")
        si = event.summary_index if event.summary_index is not None else 0
        self._set_summary(oi, si, event.part or {"type": "summary_text"})

    def _on_summary_delta(self, event: ev.ReasoningSummaryTextDelta) -> None:
        if event.delta is None:
            return
        oi = self._item(event.output_index, event.item_id, "reasoning")
        si = event.summary_index if event.summary_index is not None else 0
        self._set_summary(oi, si, {})
        self._slot((oi, ("summary", si))).chunks.append(event.delta)

    def _on_summary_done(self, event: ev.ReasoningSummaryTextDone) -> None:
        oi = self._item(event.output_index, event.item_id, "reasoning")
        si = event.summary_index if event.summary_index is not None else 0
        self._set_summary(oi, si, {})
        if event.text is not None:
            self._slot((oi, ("summary", si))).final = event.text

    def _on_reasoning_delta(self, event: ev.ReasoningTextDelta) -> None:
        if event.delta is None:
            return
        oi = self._item(event.output_index, event.item_id, "reasoning")
        ci = event.content_index if event.content_index is not None else 0
        self._part(oi, ci, "reasoning_text")
        self._slot((oi, ci)).chunks.append(event.delta)

    def _on_reasoning_done(self, event: ev.ReasoningTextDone) -> None:
        oi = self._item(event.output_index, event.item_id, "reasoning")
        ci = event.content_index if event.content_index is not None else 0
        self._part(oi, ci, "reasoning_text")
        if event.text is not None:
            self._slot((oi, ci)).final = event.text

    # --- shell --------------------------------------------------------------------------------------------------

    def _command_slot(self, event: Any) -> _Slot:
        oi = self._item(event.output_index, None, "shell_call")
        ci = event.command_index if event.command_index is not None else 0
        self._commands.setdefault(oi, set()).add(ci)
        return self._slot((oi, ("command", ci)))

    def _on_command_added(self, event: ev.ShellCallCommandAdded) -> None:
        slot = self._command_slot(event)
        if event.command:
            slot.final = event.command

    def _on_command_delta(self, event: ev.ShellCallCommandDelta) -> None:
        slot = self._command_slot(event)
        if event.delta is not None:
            slot.chunks.append(event.delta)

    def _on_command_done(self, event: ev.ShellCallCommandDone) -> None:
        slot = self._command_slot(event)
        if event.command is not None:
            slot.final = event.command

    def _on_shell_output_delta(self, event: ev.ShellCallOutputContentDelta) -> None:
        oi = self._item(event.output_index, event.item_id, "shell_call_output")
        ci = event.command_index if event.command_index is not None else 0
        outputs = self._items[oi].setdefault("output", [])
        if not isinstance(outputs, list):
            return
        while len(outputs) <= ci and ci < len(outputs) + 64:  # bounded: a hostile index cannot make us loop long
            outputs.append({"stdout": "", "stderr": ""})
        if ci < len(outputs) and isinstance(outputs[ci], dict) and event.delta is not None:
            for stream in ("stdout", "stderr"):
                piece = event.delta.get(stream)
                if isinstance(piece, str):
                    outputs[ci][stream] = str(outputs[ci].get(stream, "")) + piece

    def _on_shell_output_done(self, event: ev.ShellCallOutputContentDone) -> None:
        oi = self._item(event.output_index, event.item_id, "shell_call_output")
        if event.output is not None:
            self._items[oi]["output"] = event.output

    # --- materialising ------------------------------------------------------------------------------------------

    def materialize_item(self, oi: int) -> JSONObject:
        """One output item (``oi`` must have been seen) as assembled from the events."""
        item = dict(self._items[oi])
        slots = self._slots
        cis = self._part_index.get(oi)
        if cis:
            content = []
            for ci in sorted(cis):
                part = dict(self._parts[(oi, ci)])
                slot = slots.get((oi, ci))
                name = "refusal" if part.get("type") == "refusal" else "text"
                part[name] = slot.value() if slot is not None else part.get(name, "")
                content.append(part)
            item["content"] = content
        sis = self._summary_index.get(oi)
        if sis:
            summary = []
            for si in sorted(sis):
                part = dict(self._summaries[(oi, si)])
                slot = slots.get((oi, ("summary", si)))
                part["text"] = slot.value() if slot is not None else ""
                summary.append(part)
            item["summary"] = summary
        for name in ("arguments", "input", "code"):
            slot = slots.get((oi, name))
            if slot is not None:
                item[name] = slot.value()
        commands = self._commands.get(oi)
        if commands:
            action = dict(item.get("action") or {})
            action["commands"] = [slots[(oi, ("command", ci))].value() for ci in sorted(commands)]
            item["action"] = action
        return item


def _texts(output: list[JSONObject], part_type: str, name: str) -> list[str]:
    """The ``name`` strings of every ``part_type`` part of every message item, in output order."""
    found = []
    for item in output:
        if item.get("type") != "message":
            continue
        content = item.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == part_type:
                value = part.get(name)
                if isinstance(value, str):
                    found.append(value)
    return found


def _tool_call(item: JSONObject) -> JSONObject:
    return {
        "call_id": item.get("call_id"),
        "name": item.get("name"),
        "arguments": item.get("arguments"),
        "status": item.get("status"),
        "output": item.get("output"),
    }
