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
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.compaction_item import encode_compaction
from respstream.server.inputs.requests import parse_request
from respstream.server.inputs.response_request import InputItem, ResponseRequest
from respstream.server.store.memory import MemoryStore

if TYPE_CHECKING:
    from respstream.server.endpoints.gateway import Gateway

__all__ = ["SUMMARY_INSTRUCTIONS", "compact", "transcript"]

_FIELDS = {"model", "input", "previous_response_id", "instructions", "prompt_cache_key"}
SUMMARY_INSTRUCTIONS = (
    "You compact conversations. Summarise the conversation below so it can be continued later: keep every fact, "
    "decision, name, number and open question; drop pleasantries. Answer with the summary only."
)


def transcript(instructions: str | None, items: list[InputItem]) -> str:
    """The conversation as plain text, one line per item (what the summarising model reads)."""
    lines = [f"System: {instructions}"] if instructions else []
    for item in items:
        if item.type == "message":
            lines.append(f"{item.role.capitalize()}: {item.text}")
        elif item.type == "function_call":
            lines.append(f"Tool call {item.name}({item.arguments}) [{item.call_id}]")
        elif item.type == "function_call_output":
            lines.append(f"Tool result [{item.call_id}]: {item.output}")
    return "\n".join(lines)


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
    summarise = ResponseRequest(
        input=[InputItem("message", role="user", text=transcript(parsed.instructions, items))],
        model=model, store=False, instructions=SUMMARY_INSTRUCTIONS, server_tools=set(), tool_choice="none",
    )
    scratch = MemoryStore(max_responses=1)  # the summarising response is not kept anywhere
    record, _ = await svc.start(summarise, owner=owner, local=scratch)
    await svc.wait(record.id)
    final = await scratch.get(record.id)
    response: dict[str, Any] = final.response if final is not None else record.response
    if response.get("status") not in ("completed", "incomplete"):
        error = response.get("error") or {}
        raise HTTPError(502, str(error.get("code") or "upstream_error"),
                        f"The model could not summarise the conversation: {error.get('message') or 'no answer'}")
    summary = "".join(part.get("text", "") for item in response.get("output", []) if item.get("type") == "message"
                      for part in item.get("content", []) if part.get("type") == "output_text")
    usage = response.get("usage") or {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                                      "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                                      "total_tokens": 0}
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
                           "encrypted_content": encode_compaction(summary, str(response.get("model", model)))}],
        "usage": usage,
    })
