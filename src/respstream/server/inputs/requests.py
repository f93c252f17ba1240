"""Validate a ``POST /v1/responses`` body into a typed
:class:`~respstream.server.inputs.response_request.ResponseRequest`.

Every problem is an :class:`HTTPError` (400) naming the field (``param``, e.g. ``input[2].content[0].type``), raised
before anything reaches a model. Fields we do not implement (audio inputs, ``prompt``, hosted tools we do not run)
are ``unsupported_parameter``. Each field group has its module: ``input`` is read by
:mod:`~respstream.server.inputs.request_input`, ``tools`` by :mod:`~respstream.server.inputs.request_tools`, the
option fields (sampling, ``text``, ``reasoning``, ``include``...) by :mod:`~respstream.server.inputs.request_fields`,
``tool_choice`` by :mod:`~respstream.server.inputs.tool_policy`; this module checks the rest and how they combine.
Fields nobody defines are accepted and reported, or refused under ``strict_fields`` (DESIGN §4;
:mod:`~respstream.server.inputs.field_policy`).
"""

from __future__ import annotations

import uuid
from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.additional_tools import hoist_additional_tools
from respstream.server.inputs.body_values import check_depth, invalid, opt_bool, opt_number, opt_str, wrong_type
from respstream.server.inputs.context_management import parse_context_management, split_trigger
from respstream.server.inputs.field_policy import REFUSED_FIELDS, check_refused_fields, ignored_fields
from respstream.server.inputs.request_fields import parse_fields
from respstream.server.inputs.request_input import parse_input_items
from respstream.server.inputs.request_tools import SERVER_TOOL_TYPES, TYPED_CHOICES, parse_tools
from respstream.server.inputs.response_request import InputItem, ResponseRequest
from respstream.server.inputs.tool_policy import parse_tool_choice, server_tools_opt_in
from respstream.server.tools.mcp_tools import McpServerSpec

__all__ = ["parse_metadata", "parse_request"]

_UNSUPPORTED_FIELDS = ("prompt",)
# What _check_unsupported and check_refused_fields read: a body with none of them passes both.
_REFUSABLE_FIELDS = frozenset({*_UNSUPPORTED_FIELDS, "project_id", *REFUSED_FIELDS})


def parse_metadata(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise wrong_type("metadata", "an object")
    if len(raw) > 16:
        raise invalid("metadata may have at most 16 keys", "metadata")
    for key, value in raw.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            raise invalid("metadata values must be strings (keys <= 64, values <= 512 characters)", f"metadata.{key}")
    return dict(raw)


def _client_metadata(raw: Any) -> dict[str, str] | None:
    """``client_metadata`` (Codex CLI sends it: installation and session ids): string pairs, echoed in the Response."""
    if raw is None:
        return None
    # Codex sends its turn state, turn id and turn metadata here; a value may be up to 2,048 characters
    # (OpenAI's WebSocket mode bound; docs/responses-api.md, turn state).
    if not isinstance(raw, dict) or len(raw) > 64:
        raise invalid("client_metadata must be an object of at most 64 string values", "client_metadata",
                      "invalid_type")
    for key, value in raw.items():
        if not isinstance(value, str) or len(key) > 128 or len(value) > 2048:
            raise invalid("client_metadata values must be strings (keys <= 128, values <= 2,048 characters)",
                          f"client_metadata.{key}")
    return dict(raw)


def _check_unsupported(body: dict[str, Any]) -> None:
    for key in _UNSUPPORTED_FIELDS:
        if body.get(key) is not None:
            raise invalid(f"{key} is not supported", key, "unsupported_parameter")
    project_id = body.get("project_id")
    if project_id is not None:
        try:
            uuid.UUID(str(project_id))
        except ValueError:
            raise invalid("project_id must be a UUID", "project_id") from None


def parse_request(body: Any, *, server_tool_names: set[str], dialect: str = "platform",
                  strict_fields: bool = False, prewarm: bool = False) -> ResponseRequest:
    """Validate a decoded JSON body. Raises :class:`HTTPError` (400) naming the offending field.

    ``dialect`` decides whether server tools run without being listed in ``tools`` (only in ``platform``; see
    :mod:`~respstream.server.inputs.tool_policy`). A field nobody here knows is listed in ``ignored_fields``, or
    refused with ``strict_fields`` (:mod:`~respstream.server.inputs.field_policy`)."""
    if not isinstance(body, dict):
        raise HTTPError(400, "invalid_json", "the request body must be a JSON object")
    check_depth(body)
    ignored = ignored_fields(body, strict=strict_fields)
    body = hoist_additional_tools(body)  # Codex CLI lists its tools in an input item
    if not _REFUSABLE_FIELDS.isdisjoint(body):  # the common request sends none of them (issue 41)
        _check_unsupported(body)
        check_refused_fields(body)
    options = parse_fields(body)
    # A WebSocket prewarm (generate: false) may bring no input at all: Codex's carries only its tools.
    no_input = body.get("input") is None or body.get("input") == []
    if no_input and not prewarm:
        raise invalid("input is required", "input", "missing_required_parameter")
    model = opt_str(body, "model") or "auto"
    approvals: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    media: list[tuple[str, dict[str, Any]]] = []
    trigger = False
    items: list[InputItem]
    if no_input:
        items = []
    else:
        raw_input, trigger = split_trigger(body["input"])
        if trigger and raw_input == []:  # compact what previous_response_id / the conversation brings
            if not any(body.get(k) for k in ("previous_response_id", "conversation", "conversation_id")):
                raise invalid("nothing to compact: a compaction_trigger needs input before it, previous_response_id "
                              "or conversation", "input", "missing_required_parameter")
            items = []
        else:
            items = parse_input_items(raw_input, media=media, mcp=approvals)
    mcp_servers: list[McpServerSpec] = []
    client, server_tools = parse_tools(body.get("tools"), server_tool_names, mcp_servers)
    client_tools = client.flat
    if server_tools is None and server_tools_opt_in(dialect):
        server_tools = set()
    if options.text_format.structured:
        server_tools = set()  # a forced schema turns the server tools off, as the seed does
    raw_choice = body.get("tool_choice")
    if raw_choice is None:  # "auto": no names to check it against (the common request; issue 41)
        tool_choice, policy = parse_tool_choice(None, set(), {})
    else:
        typed = {kind: kind for kind in TYPED_CHOICES if kind in client.kinds}  # {"type": "shell"} names that tool
        tool_choice, policy = parse_tool_choice(raw_choice, {t["name"] for t in client_tools},
                                                {**SERVER_TOOL_TYPES, **typed})
    forced = policy.forced
    if forced is not None and forced not in {t["name"] for t in client_tools} and server_tools is not None \
            and forced not in server_tools:
        if options.text_format.structured:
            raise invalid(f"tool_choice forces the server tool {forced!r}, but text.format turns server tools off",
                          "tool_choice")
        server_tools = server_tools | {forced}  # forcing a hosted tool type enables it, as listing it would
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise wrong_type("max_output_tokens", "an integer")
    if max_tokens is not None and max_tokens < 1:
        raise invalid("max_output_tokens must be at least 1", "max_output_tokens")
    background = bool(opt_bool(body, "background"))
    store = opt_bool(body, "store")
    if background and store is False:
        raise invalid("background responses must be stored (store: false is not allowed with background: true)",
                      "store")
    conversation = body.get("conversation_id", body.get("conversation"))
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if conversation is not None and (not isinstance(conversation, str) or not conversation):
        name = "conversation_id" if "conversation_id" in body else "conversation"
        raise wrong_type(name, "a non-empty string (or {\"id\": ...})")
    if body.get("conversation") is not None and body.get("previous_response_id") is not None:
        # OpenAI refuses the pair (spec/openai-surface-2026.md row 14): a conversation already carries the history.
        raise invalid("conversation and previous_response_id cannot be used together (a conversation already "
                      "holds the history; send one of them)", "conversation")
    parallel = opt_bool(body, "parallel_tool_calls")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        if isinstance(instructions, list):
            instructions = "\n".join(i.text for i in parse_input_items(instructions, "instructions"))
        else:
            raise wrong_type("instructions", "a string")
    return ResponseRequest(
        input=items,
        model=model,
        stream=opt_bool(body, "stream"),
        background=background,
        store=True if store is None else store,
        instructions=instructions,
        client_tools=client_tools,
        client_kinds=client.kinds,
        declared_tools=client.declared,
        server_tools=server_tools,
        tool_choice=tool_choice,
        max_output_tokens=max_tokens,
        temperature=opt_number(body, "temperature", 0.0, 2.0),
        top_p=opt_number(body, "top_p", 0.0, 1.0),
        previous_response_id=opt_str(body, "previous_response_id"),
        conversation_id=conversation,
        conversation_api="conversation_id" not in body and conversation is not None,
        metadata=parse_metadata(body.get("metadata")),
        client_metadata=_client_metadata(body.get("client_metadata")),
        parallel_tool_calls=True if parallel is None else parallel,
        mcp_servers=mcp_servers,
        mcp_approvals=approvals[0],
        mcp_approval_requests=approvals[1],
        options=options,
        tool_policy=policy,
        media=media,
        ignored_fields=ignored,
        compaction=parse_context_management(body.get("context_management")),
        compaction_trigger=trigger,
    )
