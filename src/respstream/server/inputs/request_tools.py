"""The ``tools`` field of ``POST /v1/responses``: client tools, the hosted tool types that select server tools, MCP.

Client-run kinds (function, custom, namespace, shell...) are read by
:class:`~respstream.server.events.client_tool_kinds.ClientToolSet`; ``{"type": "mcp"}`` by
:func:`~respstream.server.tools.mcp_tools.parse_mcp_tool`. Hosted tools only OpenAI runs are refused naming them.
"""

from __future__ import annotations

from typing import Any

from respstream.server.events.client_tool_kinds import CLIENT_KINDS, ClientToolSet, base_kind
from respstream.server.inputs.body_values import invalid, opt_kind, wrong_type
from respstream.server.tools.mcp_tools import MAX_MCP_SERVERS, McpServerSpec, parse_mcp_tool

__all__ = ["SERVER_TOOL_TYPES", "TYPED_CHOICES", "parse_tools"]

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
TYPED_CHOICES = ("shell", "local_shell", "apply_patch")


def parse_tools(raw: Any, server_tool_names: set[str],
                mcp: list[McpServerSpec] | None = None) -> tuple[ClientToolSet, set[str] | None]:
    client = ClientToolSet()
    if raw is None:
        return client, None
    if not isinstance(raw, list):
        raise wrong_type("tools", "a list")
    selected: set[str] | None = None
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise wrong_type(where, "an object")
        kind = opt_kind(tool.get("type"), f"{where}.type")
        if kind is None:
            raise invalid(f"{where}.type is required", f"{where}.type", "missing_required_parameter")
        if kind == "function" or base_kind(kind) in CLIENT_KINDS:
            client.add(tool, where, server_tool_names)
        elif kind in SERVER_TOOL_TYPES:
            selected = (selected or set()) | {SERVER_TOOL_TYPES[kind]}
        elif kind == "mcp" and mcp is not None:
            spec = parse_mcp_tool(tool, where)
            if any(s.label == spec.label for s in mcp):
                raise invalid(f"{where}.server_label {spec.label!r} is used twice", f"{where}.server_label")
            if len(mcp) >= MAX_MCP_SERVERS:
                raise invalid(f"at most {MAX_MCP_SERVERS} MCP servers per request", where)
            mcp.append(spec)
        elif kind in _UNSUPPORTED_TOOL_TYPES:
            raise invalid(f"{where}.type {kind!r} is a hosted tool this gateway cannot run", f"{where}.type",
                          "unsupported_parameter")
        else:
            raise invalid(f"{where}.type {kind!r} is not a tool type this gateway knows (client tools: function, "
                          f"{', '.join(sorted(CLIENT_KINDS))}, mcp; "
                          f"server tools: {', '.join(sorted(SERVER_TOOL_TYPES))})", f"{where}.type")
    return client, selected
