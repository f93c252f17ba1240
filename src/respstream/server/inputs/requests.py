"""Validate a ``POST /v1/responses`` body into a typed :class:`ResponseRequest`.

Every problem is an :class:`HTTPError` (400) naming the field (``param``, e.g. ``input[2].content[0].type``), raised
before anything reaches a model. Fields we do not implement (audio inputs, ``prompt``, hosted tools we do not run)
are ``unsupported_parameter``. The option fields (sampling, ``text``, ``reasoning``, ``include``...) are validated by
:mod:`~respstream.server.inputs.request_fields`, image/file parts by :mod:`~respstream.server.inputs.input_parts`,
``tool_choice`` by :mod:`~respstream.server.inputs.tool_policy`. Fields nobody defines are ignored (DESIGN §4), as the
seed's changelog promises for additive fields.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from respstream.server.events.client_tool_kinds import (
    CALL_KINDS,
    CLIENT_KINDS,
    OUTPUT_KINDS,
    ClientTool,
    ClientToolSet,
    base_kind,
    call_as_input,
    output_as_input,
)
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.additional_tools import hoist_additional_tools
from respstream.server.inputs.compaction_item import decode_compaction
from respstream.server.inputs.input_parts import MEDIA_PART_TYPES, media_part
from respstream.server.inputs.request_fields import RequestFields, parse_fields
from respstream.server.inputs.tool_policy import ToolPolicy, parse_tool_choice, server_tools_opt_in
from respstream.server.tools.mcp_tools import MAX_MCP_SERVERS, McpServerSpec, parse_mcp_tool

__all__ = ["MAX_JSON_DEPTH", "SERVER_TOOL_TYPES", "InputItem", "ResponseRequest", "check_depth", "parse_request"]

# Deepest nesting of arrays/objects a request body may have. Real requests need about 6 (input -> item -> content ->
# part, or a tool's JSON Schema); anything far deeper is rejected before it reaches code (or an encoder) that recurses.
MAX_JSON_DEPTH = 64

# Hosted tool `type`s a request may list to select server tools (value: the server tool it enables).
SERVER_TOOL_TYPES: dict[str, str] = {
    "web_search": "web_search",
    "web_search_preview": "web_search",
    "web_fetch": "web_fetch",
    "calculator": "calculator",
    "current_datetime": "current_datetime",
}
# The same tools under their Open Responses extension names (`respstream:web_search`...), as the spec asks a hosted
# tool of an implementor to be named.
SERVER_TOOL_TYPES.update({f"respstream:{name}": tool for name, tool in list(SERVER_TOOL_TYPES.items())
                          if not name.endswith("_preview")})
# Hosted tools OpenAI runs on its side and the gateway cannot (client-executed kinds: events/client_tool_kinds.py).
_UNSUPPORTED_TOOL_TYPES = {"file_search", "code_interpreter", "image_generation", "computer_use_preview", "computer"}
# The client-run tool types that become `tool_choice` targets by type alone ({"type": "shell"}...).
_TYPED_CHOICES = ("shell", "local_shell", "apply_patch")
_TEXT_PARTS = {"input_text", "output_text", "text"}
_UNSUPPORTED_PARTS = {"input_audio", "image_url", "file"}
_IGNORED_ITEMS = {"web_search_call", "mcp_list_tools", "file_search_call", "item_reference", "tool_search_call",
                  "tool_search_output"}
_ROLES = {"user", "assistant", "system", "developer"}
_UNSUPPORTED_FIELDS = ("prompt",)


@dataclass(slots=True)
class InputItem:
    """One normalised input item: a text message, a function call, its output, or reasoning."""

    type: str  # message | function_call | function_call_output | reasoning
    role: str = "user"
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    output: str = ""
    parts: list[dict[str, Any]] | None = None  # image/file parts of a message, in Chat Completions form

    def to_json(self) -> dict[str, Any]:
        if self.type == "message":
            part = "output_text" if self.role == "assistant" else "input_text"
            content = [{"type": part, "text": self.text}]
            content += [_responses_part(p) for p in self.parts or ()]
            return {"type": "message", "role": self.role, "content": content}
        if self.type == "function_call":
            return {"type": "function_call", "call_id": self.call_id, "name": self.name, "arguments": self.arguments}
        if self.type == "function_call_output":
            return {"type": "function_call_output", "call_id": self.call_id, "output": self.output}
        return {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": self.text}]}


def _responses_part(chat_part: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions image/file part back in its Responses input form (for stored context)."""
    if chat_part.get("type") == "image_url":
        image = chat_part.get("image_url") or {}
        return {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail", "auto")}
    return {"type": "input_file", **(chat_part.get("file") or {})}


@dataclass(slots=True)
class ResponseRequest:
    input: list[InputItem]
    model: str = "auto"
    stream: bool | None = None
    background: bool = False
    store: bool = True
    instructions: str | None = None
    client_tools: list[dict[str, Any]] = field(default_factory=list)  # flat Responses function tools (upstream)
    client_kinds: dict[str, ClientTool] = field(default_factory=dict)  # flat name -> what the client defined
    declared_tools: list[dict[str, Any]] = field(default_factory=list)  # the client's tools as sent (the echo)
    server_tools: set[str] | None = None  # None: every server tool; else the ones selected by hosted tool types
    tool_choice: Any = "auto"
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    previous_response_id: str | None = None
    conversation_id: str | None = None
    conversation_api: bool = False  # named by OpenAI's `conversation` (must exist), not the platform's id
    metadata: dict[str, str] = field(default_factory=dict)
    parallel_tool_calls: bool = True
    mcp_servers: list[McpServerSpec] = field(default_factory=list)  # {"type": "mcp"} tools
    mcp_approvals: list[dict[str, Any]] = field(default_factory=list)  # mcp_approval_response input items
    mcp_approval_requests: list[dict[str, Any]] = field(default_factory=list)  # echoed mcp_approval_request items
    options: RequestFields = field(default_factory=RequestFields)  # sampling, text.format, reasoning, include...
    tool_policy: ToolPolicy = field(default_factory=ToolPolicy)  # tool_choice as enforced
    media: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (param, Chat part) of image/file inputs
    client_metadata: dict[str, str] | None = None  # Codex's client facts: kept and echoed, never sent upstream
    affinity: str | None = None  # session key (prompt_cache_key or session headers): server/routing/affinity.py

    # The option fields under their request names, for the Response object's echo (server/events/response_object.py).
    @property
    def presence_penalty(self) -> float | None:
        return self.options.presence_penalty

    @property
    def frequency_penalty(self) -> float | None:
        return self.options.frequency_penalty

    @property
    def top_logprobs(self) -> int | None:
        return self.options.top_logprobs

    @property
    def max_tool_calls(self) -> int | None:
        return self.options.max_tool_calls

    @property
    def truncation(self) -> str:
        return self.options.truncation

    @property
    def safety_identifier(self) -> str | None:
        return self.options.safety_identifier

    @property
    def prompt_cache_key(self) -> str | None:
        return self.options.prompt_cache_key

    @property
    def service_tier(self) -> str | None:
        return self.options.service_tier

    @property
    def reasoning(self) -> dict[str, Any]:
        return self.options.reasoning_json()

    @property
    def text(self) -> dict[str, Any]:
        return self.options.text_json()

    @property
    def input_text(self) -> str:
        """The text the router looks at: the last user message (or all text when there is none)."""
        for item in reversed(self.input):
            if item.type == "message" and item.role == "user":
                return item.text
        return "\n".join(i.text or i.output for i in self.input)


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def _type_error(param: str, expected: str) -> HTTPError:
    return _bad(f"{param} must be {expected}", param, "invalid_type")


def _opt_kind(value: Any, param: str, default: str | None = None) -> str | None:
    """A discriminator such as ``type`` or ``role``: a string (or absent -> ``default``). Raises 400 naming
    ``param`` for anything else: a list or object here must never reach a set/dict membership test."""
    if value is None:
        return default
    if not isinstance(value, str):
        raise _type_error(param, "a string")
    return value


def check_depth(body: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise a 400 ``invalid_json`` if ``body`` nests arrays/objects deeper than ``limit`` (iterative: no recursion
    on hostile input)."""
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if depth > limit:
            raise HTTPError(400, "invalid_json", f"the request body nests arrays/objects deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _opt_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise _type_error(key, "a string")
    return value


def _opt_bool(body: dict[str, Any], key: str) -> bool | None:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise _type_error(key, "a boolean")
    return value


def _opt_number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _type_error(key, "a number")
    if not low <= value <= high:
        raise _bad(f"{key} must be between {low:g} and {high:g}", key)
    return float(value)


def _content_text(content: Any, param: str, media: list[tuple[str, dict[str, Any]]] | None = None) -> str:
    """The text of a content list; image/file parts go to ``media`` as ``(param, Chat part)`` (refused when it is
    ``None``: only messages take them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _type_error(param, "a string or a list of content parts")
    texts = []
    for j, part in enumerate(content):
        where = f"{param}[{j}]"
        if not isinstance(part, dict):
            raise _type_error(where, "an object")
        kind = _opt_kind(part.get("type"), f"{where}.type")
        if kind in MEDIA_PART_TYPES and media is not None:
            media.append((where, media_part(part, where)))
            continue
        if kind in _UNSUPPORTED_PARTS or kind in MEDIA_PART_TYPES:
            raise _bad(f"{where}.type {kind!r} is not supported (text inputs only)", f"{where}.type",
                       "unsupported_parameter")
        if kind == "refusal":
            texts.append(str(part.get("refusal", "")))
            continue
        if kind not in _TEXT_PARTS:
            raise _bad(f"{where}.type must be input_text or output_text", f"{where}.type")
        text = part.get("text")
        if not isinstance(text, str):
            raise _type_error(f"{where}.text", "a string")
        texts.append(text)
    return "".join(texts)


def _input_items(raw: Any, param: str = "input",
                 media: list[tuple[str, dict[str, Any]]] | None = None,
                 mcp: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None) -> list[InputItem]:
    """``mcp``: where MCP approval responses and echoed approval requests go (they are no model input)."""
    if isinstance(raw, str):
        if not raw.strip():
            raise _bad(f"{param} is required and must not be empty", param, "missing_required_parameter")
        return [InputItem("message", text=raw)]
    if not isinstance(raw, list):
        raise _type_error(param, "a string or a list of input items")
    items: list[InputItem] = []
    for i, item in enumerate(raw):
        where = f"{param}[{i}]"
        if not isinstance(item, dict):
            raise _type_error(where, "an object")
        given = _opt_kind(item.get("type"), f"{where}.type", "message")
        kind = base_kind(given)  # (respstream:custom_tool_call)
        if kind == "message":
            role = _opt_kind(item.get("role"), f"{where}.role", "user")
            if role not in _ROLES:
                raise _bad(f"{where}.role must be one of {', '.join(sorted(_ROLES))}", f"{where}.role")
            if "content" not in item:
                raise _bad(f"{where}.content is required", f"{where}.content", "missing_required_parameter")
            assert role is not None
            found: list[tuple[str, dict[str, Any]]] = []
            text = _content_text(item["content"], f"{where}.content", found if media is not None else None)
            items.append(InputItem("message", role=role, text=text, parts=[p for _, p in found] or None))
            if media is not None:
                media.extend(found)
        elif kind == "function_call" or kind in CALL_KINDS:
            if kind == "function_call":
                for key in ("call_id", "name", "arguments"):
                    if not isinstance(item.get(key), str):
                        raise _type_error(f"{where}.{key}", "a string")
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
                raise _type_error(f"{where}.call_id", "a string")
            output = item.get("output")
            if isinstance(output, list):
                output = _content_text(output, f"{where}.output")
            if not isinstance(output, str):
                raise _type_error(f"{where}.output", "a string")
            items.append(InputItem("function_call_output", role="tool", call_id=item["call_id"], output=output))
        elif kind == "compaction":
            try:
                summary = decode_compaction(item.get("encrypted_content"))
            except ValueError as exc:
                raise _bad(f"{where}.encrypted_content {exc}", f"{where}.encrypted_content") from None
            items.append(InputItem("message", role="system", text=f"Summary of the earlier conversation: {summary}"))
        elif kind == "reasoning":
            continue  # what the Agents SDK sends back; the model does not need its own reasoning again
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
                raise _bad(f"{where} needs approval_request_id (a string) and approve (a boolean)", where,
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
            raise _bad(f"{where}.type {kind!r} is not supported", f"{where}.type", "unsupported_parameter")
    if mcp is not None and (mcp[0] or mcp[1]) and not items:
        return items  # only an approval answer: the approved call is the new input
    if not items or not any(i.text.strip() or i.parts or i.type != "message" for i in items):
        raise _bad(f"{param} is required and must not be empty", param, "missing_required_parameter")
    return items


def _tools(raw: Any, server_tool_names: set[str],
           mcp: list[McpServerSpec] | None = None) -> tuple[ClientToolSet, set[str] | None]:
    client = ClientToolSet()
    if raw is None:
        return client, None
    if not isinstance(raw, list):
        raise _type_error("tools", "a list")
    selected: set[str] | None = None
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _type_error(where, "an object")
        kind = _opt_kind(tool.get("type"), f"{where}.type")
        if kind is None:
            raise _bad(f"{where}.type is required", f"{where}.type", "missing_required_parameter")
        if kind == "function" or base_kind(kind) in CLIENT_KINDS:
            client.add(tool, where, server_tool_names)
        elif kind in SERVER_TOOL_TYPES:
            selected = (selected or set()) | {SERVER_TOOL_TYPES[kind]}
        elif kind == "mcp" and mcp is not None:
            spec = parse_mcp_tool(tool, where)
            if any(s.label == spec.label for s in mcp):
                raise _bad(f"{where}.server_label {spec.label!r} is used twice", f"{where}.server_label")
            if len(mcp) >= MAX_MCP_SERVERS:
                raise _bad(f"at most {MAX_MCP_SERVERS} MCP servers per request", where)
            mcp.append(spec)
        elif kind in _UNSUPPORTED_TOOL_TYPES:
            raise _bad(f"{where}.type {kind!r} is a hosted tool this gateway cannot run", f"{where}.type",
                       "unsupported_parameter")
        else:
            raise _bad(f"{where}.type {kind!r} is not a tool type this gateway knows (client tools: function, "
                       f"{', '.join(sorted(CLIENT_KINDS))}, mcp; server tools: {', '.join(sorted(SERVER_TOOL_TYPES))})",
                       f"{where}.type")
    return client, selected


def _metadata(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _type_error("metadata", "an object")
    if len(raw) > 16:
        raise _bad("metadata may have at most 16 keys", "metadata")
    for key, value in raw.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            raise _bad("metadata values must be strings (keys <= 64, values <= 512 characters)", f"metadata.{key}")
    return dict(raw)


def _client_metadata(raw: Any) -> dict[str, str] | None:
    """``client_metadata`` (Codex CLI sends it: installation and session ids): string pairs, echoed in the Response."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) > 64:
        raise _bad("client_metadata must be an object of at most 64 string values", "client_metadata", "invalid_type")
    for key, value in raw.items():
        if not isinstance(value, str) or len(key) > 128 or len(value) > 1024:
            raise _bad("client_metadata values must be strings (keys <= 128, values <= 1024 characters)",
                       f"client_metadata.{key}")
    return dict(raw)


def _check_unsupported(body: dict[str, Any]) -> None:
    for key in _UNSUPPORTED_FIELDS:
        if body.get(key) is not None:
            raise _bad(f"{key} is not supported", key, "unsupported_parameter")
    project_id = body.get("project_id")
    if project_id is not None:
        try:
            uuid.UUID(str(project_id))
        except ValueError:
            raise _bad("project_id must be a UUID", "project_id") from None


def parse_request(body: Any, *, server_tool_names: set[str], dialect: str = "platform") -> ResponseRequest:
    """Validate a decoded JSON body. Raises :class:`HTTPError` (400) naming the offending field.

    ``dialect`` decides whether server tools run without being listed in ``tools`` (only in ``platform``; see
    :mod:`~respstream.server.inputs.tool_policy`)."""
    if not isinstance(body, dict):
        raise HTTPError(400, "invalid_json", "the request body must be a JSON object")
    check_depth(body)
    body = hoist_additional_tools(body)  # Codex CLI lists its tools in an input item
    _check_unsupported(body)
    options = parse_fields(body)
    if "input" not in body or body["input"] is None:
        raise _bad("input is required", "input", "missing_required_parameter")
    model = _opt_str(body, "model") or "auto"
    approvals: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    media: list[tuple[str, dict[str, Any]]] = []
    items = _input_items(body["input"], media=media, mcp=approvals)
    mcp_servers: list[McpServerSpec] = []
    client, server_tools = _tools(body.get("tools"), server_tool_names, mcp_servers)
    client_tools = client.flat
    if server_tools is None and server_tools_opt_in(dialect):
        server_tools = set()
    if options.text_format.structured:
        server_tools = set()  # a forced schema turns the server tools off, as the seed does
    typed = {kind: kind for kind in _TYPED_CHOICES if kind in client.kinds}  # {"type": "shell"} names that tool
    tool_choice, policy = parse_tool_choice(body.get("tool_choice"), {t["name"] for t in client_tools},
                                            {**SERVER_TOOL_TYPES, **typed})
    forced = policy.forced
    if forced is not None and forced not in {t["name"] for t in client_tools} and server_tools is not None \
            and forced not in server_tools:
        if options.text_format.structured:
            raise _bad(f"tool_choice forces the server tool {forced!r}, but text.format turns server tools off",
                       "tool_choice")
        server_tools = server_tools | {forced}  # forcing a hosted tool type enables it, as listing it would
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise _type_error("max_output_tokens", "an integer")
    if max_tokens is not None and max_tokens < 1:
        raise _bad("max_output_tokens must be at least 1", "max_output_tokens")
    background = bool(_opt_bool(body, "background"))
    store = _opt_bool(body, "store")
    if background and store is False:
        raise _bad("background responses must be stored (store: false is not allowed with background: true)",
                   "store")
    conversation = body.get("conversation_id", body.get("conversation"))
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if conversation is not None and (not isinstance(conversation, str) or not conversation):
        name = "conversation_id" if "conversation_id" in body else "conversation"
        raise _type_error(name, "a non-empty string (or {\"id\": ...})")
    parallel = _opt_bool(body, "parallel_tool_calls")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        if isinstance(instructions, list):
            instructions = "\n".join(i.text for i in _input_items(instructions, "instructions"))
        else:
            raise _type_error("instructions", "a string")
    return ResponseRequest(
        input=items,
        model=model,
        stream=_opt_bool(body, "stream"),
        background=background,
        store=True if store is None else store,
        instructions=instructions,
        client_tools=client_tools,
        client_kinds=client.kinds,
        declared_tools=client.declared,
        server_tools=server_tools,
        tool_choice=tool_choice,
        max_output_tokens=max_tokens,
        temperature=_opt_number(body, "temperature", 0.0, 2.0),
        top_p=_opt_number(body, "top_p", 0.0, 1.0),
        previous_response_id=_opt_str(body, "previous_response_id"),
        conversation_id=conversation,
        conversation_api="conversation_id" not in body and conversation is not None,
        metadata=_metadata(body.get("metadata")),
        client_metadata=_client_metadata(body.get("client_metadata")),
        parallel_tool_calls=True if parallel is None else parallel,
        mcp_servers=mcp_servers,
        mcp_approvals=approvals[0],
        mcp_approval_requests=approvals[1],
        options=options,
        tool_policy=policy,
        media=media,
    )
