"""The tools a Codex CLI request lists, one of each kind (as tests/interop/test_codex_shaped_request.py pins them
down): a function (its shell), a ``namespace`` (its multi-agent tools, one deferred), a ``custom`` freeform tool
with a Lark grammar (``apply_patch``), ``web_search`` and ``tool_search``."""

from __future__ import annotations

from typing import Any

__all__ = ["AGENTS", "CODEX_TOOLS", "PATCH", "SHELL"]

SHELL: Any = {"type": "function", "name": "exec_command", "description": "Run a command.", "strict": False,
              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
AGENTS: Any = {"type": "namespace", "name": "multi_agent", "description": "Sub-agents.", "tools": [
    {"type": "function", "name": "spawn_agent", "parameters": {"type": "object", "properties": {
        "task": {"type": "string"}}, "required": ["task"]}},
    {"type": "function", "name": "wait", "defer_loading": True, "parameters": {"type": "object", "properties": {}}},
]}
PATCH: Any = {"type": "custom", "name": "apply_patch", "description": "Edit files.",
              "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}
CODEX_TOOLS = [SHELL, AGENTS, PATCH, {"type": "web_search", "external_web_access": False}, {"type": "tool_search"}]
