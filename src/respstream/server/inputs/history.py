"""Context for a generation: Responses input items <-> Chat Completions messages, and the response chain.

The model sees: instructions (system), then the conversation's stored items (a sliding window), then the
``previous_response_id`` chain (that response's context and output), then this request's input. Items are kept in
the normalised JSON of :class:`~respstream.server.inputs.response_request.InputItem` so every store holds the same
shape.
"""

from __future__ import annotations

from typing import Any

from respstream.server.events.client_tool_kinds import CALL_KINDS, base_kind, call_as_input
from respstream.server.inputs.compaction_item import SUMMARY_PREFIX, decode_compaction, summary_item
from respstream.server.inputs.input_parts import MEDIA_PART_TYPES, media_part
from respstream.server.inputs.response_request import InputItem

__all__ = ["items_from_json", "items_to_messages", "output_to_items"]


def output_to_items(output: list[dict[str, Any]]) -> list[InputItem]:
    """A finished response's ``output`` as input items for the next turn (server tool calls keep their result)."""
    items: list[InputItem] = []
    for raw in output:
        kind = raw.get("type")
        if kind == "message":
            text = "".join(p.get("text", "") for p in raw.get("content", []) if p.get("type") == "output_text")
            if text:
                items.append(InputItem("message", role="assistant", text=text))
        elif base_kind(kind) in CALL_KINDS or (kind == "function_call" and raw.get("namespace")):
            call_id, name, arguments = call_as_input(raw, "output")  # as the upstream saw it (a flat function)
            items.append(InputItem("function_call", role="assistant", call_id=call_id, name=name, arguments=arguments))
        elif kind in ("function_call", "mcp_call"):
            call_id = raw.get("call_id") or raw.get("id") or ""
            items.append(InputItem("function_call", role="assistant", call_id=call_id, name=raw.get("name", ""),
                                   arguments=raw.get("arguments", "")))
            result = raw.get("output") if raw.get("output") is not None else raw.get("error")
            if result is not None:
                items.append(InputItem("function_call_output", role="tool", call_id=call_id, output=str(result)))
        elif kind == "web_search_call" and raw.get("output"):
            items.append(InputItem("message", role="system", text=f"Web search results: {raw['output']}"))
    return items


def items_from_json(raw: list[dict[str, Any]]) -> list[InputItem]:
    """Stored normalised items back into :class:`InputItem` (unknown shapes are skipped). A conversation that was
    compacted holds a ``compaction`` item: the history starts there, with its summary (what it replaced is dropped)."""
    items: list[InputItem] = []
    for r in raw:
        kind = r.get("type")
        if kind == "compaction":
            try:
                summary = decode_compaction(r.get("encrypted_content"))
            except ValueError:
                continue  # not ours (a client added it): the items around it stay as they are
            items = [i for i in items if i.type == "message" and i.role in ("system", "developer")
                     and not i.text.startswith(SUMMARY_PREFIX)]  # instructions stay; the rest is in the summary
            items.append(summary_item(summary))
        elif kind == "message":
            content = r.get("content", [])
            text = "".join(str(p.get("text", "")) for p in content if p.get("type") not in MEDIA_PART_TYPES)
            parts = [media_part(p, "stored") for p in content if p.get("type") in MEDIA_PART_TYPES]
            items.append(InputItem("message", role=r.get("role", "user"), text=text, parts=parts or None))
        elif kind == "function_call":
            items.append(InputItem("function_call", role="assistant", call_id=r.get("call_id"), name=r.get("name"),
                                   arguments=r.get("arguments", "")))
        elif kind == "function_call_output":
            items.append(InputItem("function_call_output", role="tool", call_id=r.get("call_id"),
                                   output=str(r.get("output", ""))))
    return items


def items_to_messages(instructions: str | None, items: list[InputItem]) -> list[dict[str, Any]]:
    """Chat Completions messages; consecutive function calls become one assistant message with ``tool_calls``."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    answered = {i.call_id for i in items if i.type == "function_call_output"}
    called = {i.call_id for i in items if i.type == "function_call"}
    for item in items:
        if item.type == "message":
            role = "system" if item.role == "developer" else item.role
            if item.parts:  # images/files: the Chat Completions content-part list, text first
                text_part = [{"type": "text", "text": item.text}] if item.text else []
                messages.append({"role": role, "content": text_part + item.parts})
            else:
                messages.append({"role": role, "content": item.text})
        elif item.type == "function_call":
            if item.call_id not in answered:
                continue  # a call without its output confuses most chat templates
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls") and not last["content"]:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item.type == "function_call_output" and item.call_id not in called:
            messages.append({"role": "user", "content": f"Tool result ({item.call_id}): {item.output}"})
        elif item.type == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
    return messages
