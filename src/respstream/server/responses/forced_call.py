"""A forced client tool the model answered in text: turned into the call it was told to make, or a clear failure.

Why: ``tool_choice: {"type": "function", "name": X}`` (or ``"required"`` with one client tool) promises the caller
a call of X; instructor's ``Mode.RESPONSES_TOOLS`` reads nothing else. A small model (or an upstream that ignores
``tool_choice``) often answers with the arguments as JSON text instead, and a response that ends ``completed`` with
that text breaks the promise silently. :func:`forced_arguments` decides, once the first round ended in text:

- the forced tool is a ``custom`` tool: the whole text is its input (freeform tools take any text);
- the text (a ```` ```json ```` fence around it is fine) is a JSON object that satisfies the tool's parameter
  schema: those are the arguments; the message stays in the output as streamed, the call follows it;
- ``"required"`` with several tools (nothing called yet, e.g. by grounding): the text must be a client call
  written as JSON, ``{"name": <one of them>, "arguments": {...}}``;
- otherwise: a :class:`ForcedCallMissing` with a message saying what came instead; the pipeline ends the response
  ``failed`` with ``tool_choice_not_followed``.
"""

from __future__ import annotations

import json
from typing import Any

from respstream.server.events.client_tool_kinds import ClientTool
from respstream.server.inputs.tool_policy import ToolPolicy
from respstream.server.upstream.tool_schemas import schema_errors

__all__ = ["ForcedCallMissing", "forced_arguments", "forced_call", "forced_client_tool"]

_FENCE = "```"
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class ForcedCallMissing(Exception):
    """The model answered in text that cannot stand for the forced call."""


def forced_client_tool(policy: ToolPolicy, client_tools: dict[str, dict[str, Any]],
                       server_tools: set[str]) -> str | None:
    """The flat name of the client tool the first round must call, if exactly one is forced."""
    if policy.forced is not None:
        return policy.forced if policy.forced in client_tools else None
    if policy.mode == "required" and len(client_tools) == 1 and not server_tools:
        return next(iter(client_tools))
    return None


def forced_call(text: str, policy: ToolPolicy, client_tools: dict[str, dict[str, Any]], server_tools: set[str],
                kinds: dict[str, ClientTool], *, called: bool = False) -> tuple[str, str] | None:
    """``(flat tool name, JSON arguments)`` of the call a first round that ended in ``text`` was forced to make;
    ``None`` when ``tool_choice`` forced no client call (or ``"required"`` was met by a server call already:
    ``called``). Raises :class:`ForcedCallMissing`."""
    name = forced_client_tool(policy, client_tools, server_tools)
    if name is not None:
        return name, forced_arguments(text, name, client_tools[name], kinds.get(name))
    if policy.mode != "required" or policy.forced is not None or called or not client_tools:
        return None
    value = _json_object(text)
    chosen = value.get("name") if value is not None else None
    arguments = (value or {}).get("arguments", (value or {}).get("parameters"))
    if isinstance(arguments, str):
        arguments = _json_object(arguments)
    if not isinstance(chosen, str) or chosen not in client_tools or not isinstance(arguments, dict):
        raise ForcedCallMissing(f"tool_choice is required (a call of {', '.join(sorted(client_tools))}...), but the "
                                f"model answered with text ({_preview(text)}) instead of calling one")
    return chosen, forced_arguments(json.dumps(arguments), chosen, client_tools[chosen], kinds.get(chosen))


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object (a ```` ```json ```` fence around it is fine), else ``None``."""
    stripped = _unfenced(text.strip())
    try:
        value = json.loads(stripped) if stripped.startswith("{") else None
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the interpreter's stack
        return None
    return value if isinstance(value, dict) else None


def _unfenced(text: str) -> str:
    """``text`` without a ```` ```lang ```` fence around it. A scanner, not a regex: a lazy group between two
    whitespace runs backtracks cubically on a fence of spaces (issue 42, H2v); this reads each character once."""
    if len(text) < 2 * len(_FENCE) or not (text.startswith(_FENCE) and text.endswith(_FENCE)):
        return text
    start, end = len(_FENCE), len(text) - len(_FENCE)
    while start < end and text[start] in _LETTERS:
        start += 1
    return text[start:end].strip()


def forced_arguments(text: str, name: str, tool: dict[str, Any], kind: ClientTool | None) -> str:
    """The JSON arguments of the forced call ``name`` that ``text`` stands for. Raises :class:`ForcedCallMissing`."""
    if kind is not None and kind.kind == "custom":
        return json.dumps({"input": text}, ensure_ascii=False)
    value = _json_object(text)
    if value is None:
        raise ForcedCallMissing(f"tool_choice requires a call of {name!r}, but the model answered with text "
                                f"({_preview(text)}) instead of calling it")
    problems = schema_errors(value, tool.get("parameters") or {"type": "object"})
    if problems:
        raise ForcedCallMissing(f"tool_choice requires a call of {name!r}; the model answered with JSON text that "
                                f"does not fit its parameters: {'; '.join(problems[:3])}")
    return json.dumps(value, ensure_ascii=False)


def _preview(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...") if flat else "empty"
