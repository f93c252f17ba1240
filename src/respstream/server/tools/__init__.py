"""Server-side tools: ``web_search``, ``web_fetch``, ``calculator``, ``current_datetime``.

:class:`ToolRegistry` is the entry point (``specs()``, ``names()``, ``await run(name, arguments_json)``); config keys
are listed in :mod:`respstream.server.tools.registry`.
"""

from __future__ import annotations

from respstream.server.tools.registry import TOOL_NAMES, ToolRegistry, ToolResult, ToolsConfig

__all__ = ["TOOL_NAMES", "ToolRegistry", "ToolResult", "ToolsConfig"]
