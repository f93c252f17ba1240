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
from respstream.server.upstream.cache_hints import CACHE_BREAKPOINT_KEY
from respstream.server.upstream.provider_tools import REASONING_KEY

__all__ = ["items_from_json", "items_to_messages", "kept_reasoning", "output_to_items", "reasoning_item"]

_REASONING_TYPES = frozenset({"reasoning", "openai:reasoning"})  # (Open Responses prefixes OpenAI's item types)


def reasoning_item(raw: dict[str, Any]) -> InputItem | None:
    """A ``reasoning`` item that carries ``encrypted_content`` (a provider's signed or redacted reasoning, which it
    wants back unchanged on the next turn), else ``None`` (nothing the upstream needs)."""
    encrypted = raw.get("encrypted_content")
    if not isinstance(encrypted, str) or not encrypted:
        return None
    summary = raw.get("summary")
    parts = [p for p in summary if isinstance(p, dict)] if isinstance(summary, list) else []
    return InputItem("reasoning", role="assistant", text="".join(str(p.get("text", "")) for p in parts),
                     encrypted_content=encrypted, summarized=bool(parts))


def kept_reasoning(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The :data:`~respstream.server.upstream.provider_tools.REASONING_KEY` entries of output items (a tool round's
    reasoning, which its next round sends back to the provider)."""
    kept = [reasoning_item(raw) for raw in output if raw.get("type") in _REASONING_TYPES]
    return [_entry(item) for item in kept if item is not None]


def _entry(item: InputItem) -> dict[str, Any]:
    return {"summary": item.text if item.summarized else None, "encrypted_content": item.encrypted_content}


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
        elif kind in _REASONING_TYPES:
            kept = reasoning_item(raw)
            if kept is not None:
                items.append(kept)
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
        elif kind == "reasoning":
            kept = reasoning_item(r)
            if kept is not None:
                items.append(kept)
    return items


def items_to_messages(instructions: str | None, items: list[InputItem]) -> list[dict[str, Any]]:
    """Chat Completions messages; consecutive function calls become one assistant message with ``tool_calls``."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    answered = {i.call_id for i in items if i.type == "function_call_output"}
    called = {i.call_id for i in items if i.type == "function_call"}
    reasoning: list[dict[str, Any]] = []  # kept reasoning, for the next assistant message (provider upstreams)
    for item in items:
        if item.type == "reasoning":
            reasoning.append(_entry(item))
            continue
        if reasoning and item.role == "assistant" and (item.type == "message" or item.call_id in answered):
            before = len(messages)
            _add_message(messages, item, answered, called)
            if len(messages) > before:
                messages[-1][REASONING_KEY] = reasoning
            else:
                messages[-1].setdefault(REASONING_KEY, []).extend(reasoning)
            reasoning = []
            continue
        if reasoning and item.type != "function_call":
            _after_last_assistant(messages, reasoning)
            reasoning = []
        _add_message(messages, item, answered, called)
    if reasoning:
        _after_last_assistant(messages, reasoning)
    return messages


def _after_last_assistant(messages: list[dict[str, Any]], reasoning: list[dict[str, Any]]) -> None:
    """Reasoning that came after its turn's last part (Gemini's signature on a trailing empty text part): on the
    last assistant message, marked ``after``; dropped when there is none (nothing to return it with)."""
    if messages and messages[-1]["role"] == "assistant":
        messages[-1].setdefault(REASONING_KEY, []).extend({**entry, "after": True} for entry in reasoning)


def _add_message(messages: list[dict[str, Any]], item: InputItem, answered: set[str | None],
                 called: set[str | None]) -> None:
    if item.type == "message":
        role = "system" if item.role == "developer" else item.role
        if item.parts:  # images/files: the Chat Completions content-part list, text first
            text_part = [{"type": "text", "text": item.text}] if item.text else []
            messages.append({"role": role, "content": text_part + item.parts})
        else:
            messages.append({"role": role, "content": item.text})
        if item.cache_breakpoint is not None:  # (upstream/cache_hints.py: what each adapter makes of it)
            messages[-1][CACHE_BREAKPOINT_KEY] = item.cache_breakpoint
    elif item.type == "function_call":
        if item.call_id not in answered:
            return  # a call without its output confuses most chat templates
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
