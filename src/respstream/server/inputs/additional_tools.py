"""``additional_tools`` input items (OpenAI's current Responses API; Codex CLI sends its whole tool list this way):
``{"type": "additional_tools", "role": "developer", "tools": [...]}`` makes tools available from that item on.

The gateway's upstreams take one tool list a request, so the tools of every such item join the request's ``tools``
(after the ones listed there) and the item itself leaves the input: the same tools, checked and bridged by the same
code as ``tools`` (namespace, custom, shell... in requests.py), so an error names them as ``tools[N]``. What is
lost is only *where* in the history they appeared, which no Chat Completions upstream can express.
"""

from __future__ import annotations

from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = ["hoist_additional_tools"]


def hoist_additional_tools(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its ``additional_tools`` input items moved into ``tools`` (unchanged when it has none)."""
    raw = body.get("input")
    if not isinstance(raw, list) or not any(_is_additional(item) for item in raw):
        return body
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return body  # parse_request names the malformed `tools` itself
    hoisted: list[Any] = list(tools or [])
    kept: list[Any] = []
    for i, item in enumerate(raw):
        if not _is_additional(item):
            kept.append(item)
            continue
        where = f"input[{i}]"
        if item.get("role", "developer") != "developer":
            raise HTTPError(400, "invalid_value", f"{where}.role must be 'developer' for additional_tools",
                            param=f"{where}.role")
        extra = item.get("tools")
        if not isinstance(extra, list):
            raise HTTPError(400, "invalid_type", f"{where}.tools must be a list", param=f"{where}.tools")
        hoisted.extend(extra)
    return {**body, "input": kept, "tools": hoisted}


def _is_additional(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "additional_tools"
