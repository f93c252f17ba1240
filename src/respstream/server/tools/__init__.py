"""Server-side tools: ``web_search``, ``web_fetch``, ``calculator``, ``current_datetime``.

:class:`ToolRegistry` is the entry point (``specs()``, ``names()``, ``await run(name, arguments_json)``); config keys
are listed in :mod:`respstream.server.tools.registry`.

Also the remote MCP tools of a request (``mcp_tools.py``), the one module here above the writer (it lists a server's
tools through it). The rest of the folder does pure work on arguments: below upstream/, above the server's base.
"""

from __future__ import annotations

from respstream.server.tools.registry import TOOL_NAMES, ToolRegistry, ToolResult, ToolsConfig

__all__ = ["TOOL_NAMES", "ToolRegistry", "ToolResult", "ToolsConfig"]
