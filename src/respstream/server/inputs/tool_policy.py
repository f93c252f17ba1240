"""Which tools a response may use: ``tool_choice`` (incl. ``allowed_tools``), server-tool opt-in, ``max_tool_calls``.

How this works: :func:`parse_tool_choice` validates ``tool_choice`` against the request's tools and returns a
:class:`ToolPolicy`: the mode (``auto`` | ``none`` | ``required``), the one tool it forces (``{"type": "function",
"name"}`` or a hosted tool type), and for ``{"type": "allowed_tools", "tools": [...], "mode"}`` the set of names the
model may be offered at all. The pipeline offers and runs only tools in that set, so a tool outside it is never
offered and, if a model calls it anyway, never run.

Server tools: in the ``platform`` dialect a request without hosted tool types gets the seed's whole server-side
catalogue; in ``openai`` and ``openresponses`` only the hosted tool types listed in ``tools`` run (so a request with
just a client ``get_weather`` tool never triggers ``web_search``). A forced schema (``text.format`` json) turns
server tools off in every dialect, as the seed does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = ["ToolPolicy", "parse_tool_choice", "server_tools_opt_in"]

_MODES = ("auto", "none", "required")
_MAX_ALLOWED = 128


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    mode: str = "auto"
    forced: str | None = None  # the one tool (function name or server tool name) the model must call
    allowed: frozenset[str] | None = None  # None: every tool of the request may be offered

    def permits(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed

    def chat_tool_choice(self) -> Any:
        """Chat Completions ``tool_choice`` for the tools actually offered."""
        if self.forced is not None:
            return {"type": "function", "function": {"name": self.forced}}
        return self.mode


def server_tools_opt_in(dialect_name: str) -> bool:
    """True when server tools run only if the request lists them (every dialect but the seed's ``platform``)."""
    return dialect_name != "platform"


def _bad(message: str) -> HTTPError:
    return HTTPError(400, "invalid_value", message, param="tool_choice")


def _named(entry: Any, where: str, client_names: set[str], hosted: Mapping[str, str]) -> str:
    """The tool name one ``{"type": "function"|"custom", "name"}`` / ``{"type": <hosted>}`` entry refers to
    (``hosted`` also maps ``shell``/``apply_patch``/``local_shell`` when the request defines those tools)."""
    if not isinstance(entry, dict):
        raise HTTPError(400, "invalid_type", f"{where} must be an object", param=where)
    kind = entry.get("type")
    if kind in ("function", "custom"):  # a custom tool is a flat function of the same name upstream
        name = entry.get("name")
        if not isinstance(name, str) or name not in client_names:
            raise HTTPError(400, "invalid_value", f"{where} names {kind} {name!r}, which is not in tools",
                            param=where)
        return name
    if isinstance(kind, str) and kind in hosted:
        return hosted[kind]
    raise HTTPError(400, "invalid_value", f"{where}.type must be 'function' or a server tool type",
                    param=f"{where}.type")


def parse_tool_choice(raw: Any, client_names: set[str], hosted: Mapping[str, str]) -> tuple[Any, ToolPolicy]:
    """``(echo, policy)`` for the request's ``tool_choice``. ``hosted``: hosted tool type -> server tool name."""
    if raw is None:
        return "auto", ToolPolicy()
    if isinstance(raw, str):
        if raw not in _MODES:
            raise _bad("tool_choice must be auto, none, required, {type: function, name} or {type: allowed_tools}")
        return raw, ToolPolicy(mode=raw)
    if not isinstance(raw, dict):
        raise HTTPError(400, "invalid_type", "tool_choice must be a string or an object", param="tool_choice")
    if raw.get("type") != "allowed_tools":
        name = _named(raw, "tool_choice", client_names, hosted)
        return raw, ToolPolicy(mode="required", forced=name)
    tools = raw.get("tools")
    if not isinstance(tools, list) or not 1 <= len(tools) <= _MAX_ALLOWED:
        raise HTTPError(400, "invalid_value", f"tool_choice.tools must list 1 to {_MAX_ALLOWED} tools",
                        param="tool_choice.tools")
    names = frozenset(_named(t, f"tool_choice.tools[{i}]", client_names, hosted) for i, t in enumerate(tools))
    mode = raw.get("mode", "auto")
    if mode not in ("auto", "required"):
        raise HTTPError(400, "invalid_value", "tool_choice.mode must be auto or required", param="tool_choice.mode")
    return raw, ToolPolicy(mode=mode, allowed=names)
