"""``GET /v1/responses/{id}/input_items`` (OpenAI's list) and ``POST /v1/responses/input_tokens``.

Input items: every response keeps the items of its own request's ``input`` (``record.request["input_items"]``, each
with an id given at creation: ``msg_`` / ``fc_`` / ``fco_`` in the prefixed dialects), listed in OpenAI's shape
``{"object": "list", "data", "first_id", "last_id", "has_more"}`` with ``order`` (``desc`` default, ``asc``),
``after`` (an item id: the page continues after it), ``limit`` (1-100, default 20) and ``include`` (OpenAI's values
are accepted; the gateway's text-only items have none of that extra content, so nothing is added). Items of the
``previous_response_id`` chain belong to those responses and are listed there. Like retrieve: the owner's key only,
``store: false`` responses are not found.

Input tokens: the body of a create request; the context (``previous_response_id`` chain, conversation) is resolved
as for a create, routed the same way, and counted by the routed upstream's own tokenizer where it has one (the
embedded model and llama.cpp servers: ``/apply-template`` + ``/tokenize``), ``"estimated": false``; otherwise it is an
estimate, ``"estimated": true``: ceil(characters / 4) + 3 per message (+ tool schemas' characters / 4), the usual
rule of thumb for English text with BPE tokenizers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.field_policy import IGNORED_FIELDS_HEADER
from respstream.server.inputs.history import items_to_messages
from respstream.server.inputs.input_records import input_item_records
from respstream.server.inputs.requests import parse_request
from respstream.server.inputs.structured_output import check_schema

if TYPE_CHECKING:
    from respstream.server.endpoints.gateway import Gateway

__all__ = ["INCLUDE_VALUES", "check_include", "estimate_tokens", "input_item_records", "input_tokens", "item_page",
           "list_input_items"]

# OpenAI's `include` values (its ResponseIncludable enum).
INCLUDE_VALUES = frozenset({
    "file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
    "message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
    "reasoning.encrypted_content", "message.output_text.logprobs",
})


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return 20
    try:
        value = int(raw)
    except ValueError:
        raise HTTPError(400, "invalid_value", f"limit must be an integer, not {raw[:40]!r}", param="limit") from None
    if not 1 <= value <= 100:
        raise HTTPError(400, "invalid_value", "limit must be between 1 and 100", param="limit")
    return value


def check_include(request: Request) -> None:
    for value in [*request.query_params.getlist("include"), *request.query_params.getlist("include[]")]:
        if value not in INCLUDE_VALUES:
            raise HTTPError(400, "invalid_value", f"include value {value[:60]!r} is not one of: "
                            f"{', '.join(sorted(INCLUDE_VALUES))}", param="include")


def page_window(request: Request) -> tuple[str, int, str | None] | None:
    """``(order, items wanted past the cursor, after)`` of a page: ``limit`` + 1, to know ``has_more``; None for a
    bad ``order`` (:func:`item_page` checks the query and says what is wrong)."""
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        return None
    return order, _limit(query.get("limit")) + 1, query.get("after") or None


def item_page(items: list[dict[str, Any]], request: Request, where: str) -> dict[str, Any]:
    """One page of ``items`` (oldest first) in OpenAI's list shape, by the request's ``order``, ``after``,
    ``limit`` and ``include``. ``where`` names the owner in the not-found message of an unknown ``after``."""
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise HTTPError(400, "invalid_value", "order must be 'asc' or 'desc'", param="order")
    limit = _limit(query.get("limit"))
    check_include(request)
    items = list(reversed(items)) if order == "desc" else list(items)
    after = query.get("after")
    if after:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise HTTPError(404, "not_found", f"Item with id '{after[:80]}' not found in {where}.", param="after")
        items = items[ids.index(after) + 1:]
    page = items[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(items) > limit}


async def list_input_items(gw: Gateway, request: Request) -> Response:
    record = await gw._record(request)
    items: list[dict[str, Any]] = list(record.request.get("input_items") or [])
    return JSONResponse(item_page(items, request, f"response '{record.id}'"))


def estimate_tokens(messages: list[dict[str, Any]], extra_text: str = "") -> int:
    """ceil(characters / 4) + 3 per message (content and tool calls), + ceil(len(extra_text) / 4)."""
    total = 0
    for message in messages:
        content = message.get("content") or ""
        calls = message.get("tool_calls")
        text = content + (msgspec.json.encode(calls).decode() if calls else "")
        total += 3 + math.ceil(len(text) / 4)
    return total + math.ceil(len(extra_text) / 4)


async def input_tokens(gw: Gateway, request: Request) -> Response:
    owner = gw.authenticate(request)
    await gw.limit_rate(request, owner)
    body = await gw.read_json(request)
    svc = gw.svc
    chain_only = isinstance(body, dict) and body.get("input") is None and bool(
        body.get("previous_response_id") or body.get("conversation") or body.get("conversation_id"))
    if chain_only:
        body = {**body, "input": "-"}  # validated as a create body, then only the chain is counted
    req = parse_request(body, server_tool_names=svc.tools.names(), strict_fields=gw.config.strict_fields)
    if chain_only:
        req.input = []
    await check_schema(req.options.text_format)
    items = await svc.context(req, owner)
    messages = items_to_messages(req.instructions, items)
    tools_text = msgspec.json.encode(req.client_tools).decode() if req.client_tools else ""
    decision = await svc.route(req)
    count = getattr(getattr(decision, "upstream", None), "count_tokens", None)
    counted = await count(messages, tools_text) if count is not None else None
    # The same field policy as a create: an unknown field is named, as the create would name it.
    headers = {IGNORED_FIELDS_HEADER: ", ".join(req.ignored_fields)} if req.ignored_fields else None
    if counted is not None:
        return JSONResponse({"object": "response.input_tokens", "input_tokens": counted, "estimated": False},
                            headers=headers)
    return JSONResponse({"object": "response.input_tokens", "input_tokens": estimate_tokens(messages, tools_text),
                         "estimated": True}, headers=headers)
