"""The server tools' names and their Chat Completions ``tools`` entries (what models are offered). No IO.

Kept apart from the registry: code that only needs to recognise a server tool (the scripted upstream) reads this.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOL_NAMES", "TOOL_SPECS", "is_server_tool_spec"]

TOOL_NAMES = ("web_search", "web_fetch", "calculator", "current_datetime")


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOL_SPECS: dict[str, dict[str, Any]] = {
    "web_search": _function(
        "web_search",
        "Search the web for current or factual information. Returns a JSON list of {title, url, snippet}.",
        {"query": {"type": "string", "description": "What to search for."}},
        ["query"],
    ),
    "web_fetch": _function(
        "web_fetch",
        "Fetch one web page (http or https) and return its readable text.",
        {"url": {"type": "string", "description": "The absolute URL of the page."}},
        ["url"],
    ),
    "calculator": _function(
        "calculator",
        "Evaluate an arithmetic expression exactly, e.g. '(12.5 * 4) / 3' or 'sqrt(2) ** 3'.",
        {"expression": {"type": "string", "description": "Numbers, + - * / // % ** ( ), sqrt, log, sin, pi, ..."}},
        ["expression"],
    ),
    "current_datetime": _function(
        "current_datetime",
        "The current date and time (ISO 8601) in an IANA time zone.",
        {"timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Amsterdam. Default UTC."}},
        [],
    ),
}


def is_server_tool_spec(spec: Any) -> bool:
    """True when a Chat Completions ``tools`` entry is one of ours: a server tool's name *and* its parameters.

    A client may define its own function called, say, ``calculator`` when the server tool is disabled; its schema
    then differs from ours, and it is the client's tool.
    """
    if not isinstance(spec, dict):
        return False
    function = spec.get("function")
    if not isinstance(function, dict):
        return False
    ours = TOOL_SPECS.get(str(function.get("name")))
    return ours is not None and function.get("parameters") == ours["function"]["parameters"]
