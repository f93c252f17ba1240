"""The ``input`` field of ``POST /v1/responses`` (and ``instructions`` given as items): normalised
:class:`~respstream.server.inputs.response_request.InputItem` s, every refusal naming its place
(``input[2].content[0].type``).

Image/file parts are read by :mod:`~respstream.server.inputs.input_parts`, client-run call kinds by
:mod:`~respstream.server.events.client_tool_kinds`; MCP approval items are set aside (they are no model input).
"""

from __future__ import annotations

from typing import Any

from respstream.server.events.client_tool_kinds import (
    CALL_KINDS,
    OUTPUT_KINDS,
    base_kind,
    call_as_input,
    output_as_input,
)
from respstream.server.inputs.body_values import invalid, opt_kind, wrong_type
from respstream.server.inputs.compaction_item import decode_compaction, summary_item
from respstream.server.inputs.history import reasoning_item
from respstream.server.inputs.input_parts import MEDIA_PART_TYPES, media_part
from respstream.server.inputs.response_request import InputItem

__all__ = ["parse_input_items"]

_TEXT_PARTS = {"input_text", "output_text", "text"}
_UNSUPPORTED_PARTS = {"input_audio", "image_url", "file"}
_IGNORED_ITEMS = {"web_search_call", "mcp_list_tools", "file_search_call", "item_reference", "tool_search_call",
                  "tool_search_output"}
_ROLES = {"user", "assistant", "system", "developer"}


def _content_text(content: Any, param: str, media: list[tuple[str, dict[str, Any]]] | None = None) -> str:
    """The text of a content list; image/file parts go to ``media`` as ``(param, Chat part)`` (refused when it is
    ``None``: only messages take them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise wrong_type(param, "a string or a list of content parts")
    texts = []
    for j, part in enumerate(content):
        where = f"{param}[{j}]"
        if not isinstance(part, dict):
            raise wrong_type(where, "an object")
        kind = opt_kind(part.get("type"), f"{where}.type")
        if kind in MEDIA_PART_TYPES and media is not None:
            media.append((where, media_part(part, where)))
            continue
        if kind in _UNSUPPORTED_PARTS or kind in MEDIA_PART_TYPES:
            raise invalid(f"{where}.type {kind!r} is not supported (text inputs only)", f"{where}.type",
                          "unsupported_parameter")
        if kind == "refusal":
            texts.append(str(part.get("refusal", "")))
            continue
        if kind not in _TEXT_PARTS:
            raise invalid(f"{where}.type must be input_text or output_text", f"{where}.type")
        text = part.get("text")
        if not isinstance(text, str):
            raise wrong_type(f"{where}.text", "a string")
        texts.append(text)
    return "".join(texts)


def _breakpoint_of(content: Any) -> dict[str, Any] | None:
    """The last ``prompt_cache_breakpoint`` object on a part of ``content`` (its checks: inputs/prompt_cache.py)."""
    marks = [p["prompt_cache_breakpoint"] for p in content if isinstance(p, dict)
             and isinstance(p.get("prompt_cache_breakpoint"), dict)] if isinstance(content, list) else []
    return dict(marks[-1]) if marks else None


def parse_input_items(raw: Any, param: str = "input",
                      media: list[tuple[str, dict[str, Any]]] | None = None,
                      mcp: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None) -> list[InputItem]:
    """``mcp``: where MCP approval responses and echoed approval requests go (they are no model input)."""
    if isinstance(raw, str):
        if not raw.strip():
            raise invalid(f"{param} is required and must not be empty", param, "missing_required_parameter")
        return [InputItem("message", text=raw)]
    if not isinstance(raw, list):
        raise wrong_type(param, "a string or a list of input items")
    items: list[InputItem] = []
    for i, item in enumerate(raw):
        where = f"{param}[{i}]"
        if not isinstance(item, dict):
            raise wrong_type(where, "an object")
        given = opt_kind(item.get("type"), f"{where}.type", "message")
        kind = base_kind(given)  # (respstream:custom_tool_call)
        if kind == "message":
            role = opt_kind(item.get("role"), f"{where}.role", "user")
            if role not in _ROLES:
                raise invalid(f"{where}.role must be one of {', '.join(sorted(_ROLES))}", f"{where}.role")
            if "content" not in item:
                raise invalid(f"{where}.content is required", f"{where}.content", "missing_required_parameter")
            assert role is not None
            found: list[tuple[str, dict[str, Any]]] = []
            text = _content_text(item["content"], f"{where}.content", found if media is not None else None)
            items.append(InputItem("message", role=role, text=text, parts=[p for _, p in found] or None,
                                   cache_breakpoint=_breakpoint_of(item["content"])))
            if media is not None:
                media.extend(found)
        elif kind == "function_call" or kind in CALL_KINDS:
            if kind == "function_call":
                for key in ("call_id", "name", "arguments"):
                    if not isinstance(item.get(key), str):
                        raise wrong_type(f"{where}.{key}", "a string")
            call_id, name, arguments = call_as_input(item, where)  # namespace/custom/shell... as the upstream saw it
            items.append(InputItem("function_call", role="assistant", call_id=call_id, name=name,
                                   arguments=arguments))
            if kind == "function_call" and item.get("server_tool") is True and isinstance(item.get("output"), str):
                # A server tool call echoed back from a platform-dialect response: its result came in the item.
                items.append(InputItem("function_call_output", role="tool", call_id=call_id, output=item["output"]))
        elif kind in OUTPUT_KINDS:
            call_id, answer = output_as_input(item, where, _content_text)
            items.append(InputItem("function_call_output", role="tool", call_id=call_id, output=answer))
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise wrong_type(f"{where}.call_id", "a string")
            output = item.get("output")
            if isinstance(output, list):
                output = _content_text(output, f"{where}.output")
            if not isinstance(output, str):
                raise wrong_type(f"{where}.output", "a string")
            items.append(InputItem("function_call_output", role="tool", call_id=item["call_id"], output=output))
        elif kind == "compaction":
            try:
                summary = decode_compaction(item.get("encrypted_content"))
            except ValueError as exc:
                raise invalid(f"{where}.encrypted_content {exc}", f"{where}.encrypted_content") from None
            items.append(summary_item(summary))
        elif kind == "reasoning":
            kept = reasoning_item(item)
            if kept is not None:  # a provider's signed reasoning goes back to it, in place (upstream/provider_tools.py)
                items.append(kept)
            # else: what the Agents SDK sends back; the model does not need its own reasoning again
        elif kind == "mcp_call" or (given != kind and str(kind).endswith("_call")):
            # echoed by SDKs (also Open Responses' `respstream:<server tool>_call` items): the call and its result
            # are history the model must see
            call_id = str(item.get("call_id") or item.get("id") or f"mcp_{i}")
            items.append(InputItem("function_call", role="assistant", call_id=call_id, name=str(item.get("name", "")),
                                   arguments=str(item.get("arguments") or "{}")))
            result = item.get("output") if item.get("output") is not None else item.get("error")
            items.append(InputItem("function_call_output", role="tool", call_id=call_id, output=str(result or "")))
        elif kind == "mcp_approval_response":
            if not isinstance(item.get("approval_request_id"), str) or not isinstance(item.get("approve"), bool):
                raise invalid(f"{where} needs approval_request_id (a string) and approve (a boolean)", where,
                              "invalid_type")
            if mcp is not None:
                mcp[0].append(item)
            continue
        elif kind == "mcp_approval_request":
            if mcp is not None:
                mcp[1].append(item)
            continue
        elif kind in _IGNORED_ITEMS:
            continue  # hosted-tool items echoed back by SDKs: already reflected in the assistant text
        else:
            raise invalid(f"{where}.type {kind!r} is not supported", f"{where}.type", "unsupported_parameter")
    if mcp is not None and (mcp[0] or mcp[1]) and not items:
        return items  # only an approval answer: the approved call is the new input
    if not items or not any(i.text.strip() or i.parts or i.type != "message" for i in items):
        raise invalid(f"{param} is required and must not be empty", param, "missing_required_parameter")
    return items
