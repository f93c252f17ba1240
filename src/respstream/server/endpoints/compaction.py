"""``POST /v1/responses/compact``: the spec's ``CompactResource`` — a conversation summarised into one item.

How this works: the body (``model`` required; ``input``, ``previous_response_id``, ``instructions``,
``prompt_cache_key``) is validated like a create body, its full context resolved like a create's (the
``previous_response_id`` chain included, owned by the caller), written out as a plain transcript and summarised by
an ordinary response on the routed model (no tools, ``store: false``, written to a throwaway in-process store so
nothing of it is kept). The answer is ``{"id", "object": "response.compaction", "created_at", "output":
[<every user message>..., {"type": "compaction", "id", "encrypted_content"}], "usage"}`` (OpenAI's shape); the
item goes back in as input to ``/v1/responses`` (HTTP or WebSocket) where it becomes the summary (see
:mod:`compaction_item`).

``prompt_cache_key`` is accepted and has no effect: the gateway's upstreams cache prompt prefixes on their own.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.compaction_item import encode_compaction
from respstream.server.inputs.requests import parse_request
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.responses.compaction_step import SUMMARY_INSTRUCTIONS, summarise, transcript

if TYPE_CHECKING:
    from respstream.server.endpoints.gateway import Gateway

__all__ = ["SUMMARY_INSTRUCTIONS", "compact", "transcript"]

_FIELDS = {"model", "input", "previous_response_id", "instructions", "prompt_cache_key"}


async def compact(gw: Gateway, request: Request) -> Response:
    owner = gw.authenticate(request)
    await gw.limit_rate(request, owner)
    body = await gw.read_json(request)
    if not isinstance(body, dict):
        raise HTTPError(400, "invalid_json", "the request body must be a JSON object")
    for key in body:
        if key not in _FIELDS:
            raise HTTPError(400, "unsupported_parameter",
                            f"{key} is not a field of /v1/responses/compact (known: {', '.join(sorted(_FIELDS))})",
                            param=key)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise HTTPError(400, "missing_required_parameter" if model is None else "invalid_type",
                        "model is required (a string, e.g. 'auto')", param="model")
    cache_key = body.get("prompt_cache_key")
    if cache_key is not None and not isinstance(cache_key, str):
        raise HTTPError(400, "invalid_type", "prompt_cache_key must be a string", param="prompt_cache_key")
    svc = gw.svc
    source = {k: body[k] for k in ("model", "input", "previous_response_id", "instructions") if k in body}
    if source.get("input") is None and source.get("previous_response_id") is not None:
        source["input"] = []  # only the chain is compacted
    parsed = parse_request(source, server_tool_names=svc.tools.names()) if source.get("input") != [] else None
    if parsed is None:
        parsed = ResponseRequest(input=[], model=model, previous_response_id=source.get("previous_response_id"),
                                 instructions=source.get("instructions"))
    items = await svc.context(parsed, owner)
    if not items:
        raise HTTPError(400, "missing_required_parameter", "input is required (nothing to compact)", param="input")
    summary = await summarise(svc, items, instructions=parsed.instructions, model=model, owner=owner)
    dialect = svc.dialect
    # OpenAI's shape: every user message as it was, then one compaction item holding the summary of it all.
    kept = [{"type": "message", "id": dialect.new_id("msg"), "status": "completed", "role": "user",
             "content": [{"type": "input_text", "text": item.text}]}
            for item in items if item.type == "message" and item.role == "user"]
    return JSONResponse({
        "id": dialect.new_id("cmp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*kept, {"type": "compaction", "id": dialect.new_id("cmp"),
                           "encrypted_content": encode_compaction(summary.text, summary.model)}],
        "usage": summary.usage,
    })
