"""The real gateway (respstream.server.http.app.create_app) for the browser tests, on a loopback thread.

The upstream is the in-process SIMULATED ``scripted:`` backend. Components another engineer has not landed yet
(the server tool registry, the rewriter) are replaced by the small stand-ins below until they exist, so the page is
exercised against the real HTTP/streaming core either way; once they land, the real ones are used automatically.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app


@dataclass
class _ToolResult:
    output: str
    status: str


class StandInTools:
    """SIMULATED server tools (used only while respstream.server.tools has no ToolRegistry)."""

    def specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
                for n in sorted(self.names())]

    def names(self) -> set[str]:
        return {"web_search", "web_fetch", "calculator", "current_datetime"}

    async def run(self, name: str, arguments_json: str) -> _ToolResult:
        if name == "calculator":
            expression = json.loads(arguments_json or "{}").get("expression", "")
            return _ToolResult("4" if expression.replace(" ", "") == "2+2" else "?", "completed")
        return _ToolResult(f"{name}: not available in this test", "failed")


class IdentityRewriter:
    """Stand-in rewriter that changes nothing (used only while respstream.server.responses.rewrite is missing)."""

    async def rewrite(self, text: str, *, language: str | None) -> str:
        return text


def _has(module: str, attr: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def stand_ins() -> dict[str, str]:
    """Which components are stand-ins right now (for test ids and the report)."""
    out = {}
    if not _has("respstream.server.tools", "ToolRegistry"):
        out["tools"] = "StandInTools"
    if not _has("respstream.server.responses.rewrite", "Rewriter"):
        out["rewriter"] = "IdentityRewriter"
    return out


def gateway_app(upstream: str, *, dialect: str = "platform") -> Any:
    """The real gateway app streaming from ``upstream`` (a ``scripted:...`` spec)."""
    missing = stand_ins()
    comps = Components(
        tools=StandInTools() if "tools" in missing else None,
        rewriter=IdentityRewriter() if "rewriter" in missing else None,
    )
    return create_app(Config(upstreams=[upstream], dialect=dialect), comps)
