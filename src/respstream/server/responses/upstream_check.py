"""Before a response starts: ask the chosen upstream whether it can take the request (provider adapters such as
Gemini's refuse what they cannot say), so a refusal is a 400 naming the field, never a stream that fails.

How this works: an upstream with ``check_request(GenerationRequest)`` is shown the first round's request as the
pipeline will build it (the client's function tools, ``tool_choice``, every forwarded option); it raises
:class:`~respstream.server.upstream.provider_request.RequestRefused`, which becomes ``400 unsupported_parameter``.
Upstreams without the method take everything, as before.
"""

from __future__ import annotations

from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.responses.chat_request import chat_options
from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.provider_request import RequestRefused

__all__ = ["check_upstream_request"]


def check_upstream_request(upstream: Any, req: ResponseRequest, model_id: str,
                           messages: list[dict[str, Any]]) -> None:
    """Raise :class:`HTTPError` 400 when ``upstream`` refuses ``req`` (see the module docstring)."""
    check = getattr(upstream, "check_request", None)
    if check is None:
        return
    tools = [{"type": "function", "function": {
        "name": tool["name"], "description": tool.get("description") or "",
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}} for tool in req.client_tools]
    request = GenerationRequest(
        model=model_id, messages=messages, tools=tools,
        tool_choice=req.tool_policy.chat_tool_choice() if tools else None,
        max_output_tokens=req.max_output_tokens, temperature=req.temperature,
        options=chat_options(req, tools_offered=bool(tools)),
    )
    try:
        check(request)
    except RequestRefused as exc:
        raise HTTPError(400, "unsupported_parameter", exc.message, param=exc.param) from None
