"""Assembling tool-call, hosted-tool, reasoning and shell items (DESIGN §2 "Assembler").

Item-level strings (function / MCP arguments, custom tool input, interpreter code) are slots keyed
``(output_index, name)``; reasoning summaries ``(output_index, ("summary", i))`` and reasoning text parts like content
parts; shell commands ``(output_index, ("command", i))``. Hosted-tool status events only set the item's ``status``.
:class:`ToolItems` adds these handlers to :class:`~respstream.protocol.output_items.OutputItems`; ``tool_handlers()``
is their part of the assembler's dispatch table.
"""

from __future__ import annotations

from typing import Any, Final

from respstream.protocol import events as ev
from respstream.protocol.output_items import OutputItems, Slot

__all__ = ["STATUS_EVENTS", "ToolItems"]

# Hosted-tool status events -> (item type of a placeholder, status they set).
STATUS_EVENTS: Final[dict[type[ev.Event], tuple[str, str | None]]] = {
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


class ToolItems(OutputItems):
    """Handlers for tool-call, hosted-tool, reasoning and shell events (see the module docstring)."""

    def tool_handlers(self) -> dict[type[ev.Event], Any]:
        """Event class -> handler, for the assembler's dispatch table."""
        handlers: dict[type[ev.Event], Any] = {
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
        }
        for cls in STATUS_EVENTS:
            handlers[cls] = self._on_status
        return handlers

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
        kind, status = STATUS_EVENTS[event.__class__]
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

    def _command_slot(self, event: Any) -> Slot:
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
        if 0 <= ci < len(outputs) and isinstance(outputs[ci], dict) and event.delta is not None:
            for stream in ("stdout", "stderr"):
                piece = event.delta.get(stream)
                if isinstance(piece, str):
                    outputs[ci][stream] = str(outputs[ci].get(stream, "")) + piece

    def _on_shell_output_done(self, event: ev.ShellCallOutputContentDone) -> None:
        oi = self._item(event.output_index, event.item_id, "shell_call_output")
        if event.output is not None:
            self._items[oi]["output"] = event.output
