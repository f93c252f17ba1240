"""The server-side tools the gateway offers to models: specs for the upstream, and ``run()`` that never raises.

Config (the ``[tools]`` table; every key optional)::

    enabled = ["web_search", "web_fetch", "calculator", "current_datetime"]
    timeout = 15.0                     # seconds per tool call (default for every tool)
    timeouts = { web_fetch = 10.0 }    # per-tool overrides
    search_provider = "embedded"       # embedded (SQLite FTS5) | searxng | ddgs
    searxng_url = "http://127.0.0.1:8888"
    index_path = "~/.local/share/respstream/search.db"   # default: $RESPSTREAM_DATA_DIR or the XDG data dir
    corpus = "<package>/server/corpus" # indexed on first use when the index is empty; "" disables
    max_results = 5
    max_citations = 64                 # url_citation annotations per answer (server/responses/citations.py); 0 disables
    fetch_allow = []                   # CIDRs or host names web_fetch may reach even if private/loopback
    fetch_max_bytes = 2097152
    fetch_max_chars = 20000            # of extracted text handed to the model
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from respstream.server.tools.calculator import CalculatorError, evaluate, format_number
from respstream.server.tools.clock import TimeZoneError, describe_datetime
from respstream.server.tools.netguard import AddressPolicy, FetchRefused
from respstream.server.tools.search_index import DEFAULT_CORPUS, default_index_path
from respstream.server.tools.specs import TOOL_NAMES, TOOL_SPECS
from respstream.server.tools.web_fetch import FetchError, fetch_url
from respstream.server.tools.web_search import DdgsSearch, EmbeddedSearch, SearchError, SearchProvider, SearxngSearch

__all__ = ["TOOL_NAMES", "ToolRegistry", "ToolResult", "ToolsConfig"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    output: str
    status: Literal["completed", "failed"] = "completed"


class _ToolFailure(Exception):
    """A tool's expected failure; its message becomes the failed output."""


@dataclass
class ToolsConfig:
    enabled: list[str] = field(default_factory=lambda: list(TOOL_NAMES))
    timeout: float = 15.0
    timeouts: dict[str, float] = field(default_factory=dict)
    search_provider: str = "embedded"
    searxng_url: str | None = None
    index_path: str | None = None
    corpus: str | None = None
    max_results: int = 5
    max_citations: int = 64
    fetch_allow: list[str] = field(default_factory=list)
    fetch_max_bytes: int = 2 << 20
    fetch_max_chars: int = 20_000

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> ToolsConfig:
        """Raises ValueError naming an unknown key, tool or provider."""
        data = dict(data or {})
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown tools config key(s): {', '.join(sorted(unknown))}")
        config = cls(**data)
        bad = [n for n in config.enabled if n not in TOOL_NAMES]
        if bad:
            raise ValueError(f"tools.enabled: unknown tool(s) {', '.join(bad)}; known: {', '.join(TOOL_NAMES)}")
        if config.search_provider not in ("embedded", "searxng", "ddgs"):
            raise ValueError("tools.search_provider must be embedded, searxng or ddgs")
        if not isinstance(config.max_citations, int) or isinstance(config.max_citations, bool) \
                or config.max_citations < 0:
            raise ValueError(f"tools.max_citations must be an integer >= 0, got {config.max_citations!r}")
        if config.search_provider == "searxng" and not config.searxng_url:
            raise ValueError("tools.search_provider = searxng needs tools.searxng_url")
        return config


def _string_arg(args: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise _ToolFailure(f"argument {key!r} must be a non-empty string")
    return value


class ToolRegistry:
    """Server tools. ``config``: a :class:`ToolsConfig`, the ``[tools]`` mapping, or None for defaults.

    Raises ValueError on bad config at construction; ``run()`` never raises.
    """

    def __init__(self, config: ToolsConfig | Mapping[str, Any] | None = None) -> None:
        self.config = config if isinstance(config, ToolsConfig) else ToolsConfig.from_mapping(config)
        self.policy = AddressPolicy(self.config.fetch_allow)
        self._search: SearchProvider | None = None
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[str]]] = {
            "web_search": self._web_search,
            "web_fetch": self._web_fetch,
            "calculator": self._calculator,
            "current_datetime": self._current_datetime,
        }

    def specs(self) -> list[dict[str, Any]]:
        """Chat Completions ``tools`` entries for the enabled tools."""
        return [TOOL_SPECS[name] for name in TOOL_NAMES if name in self.config.enabled]

    def names(self) -> set[str]:
        return {name for name in TOOL_NAMES if name in self.config.enabled}

    def timeout_for(self, name: str) -> float:
        return float(self.config.timeouts.get(name, self.config.timeout))

    async def run(self, name: str, arguments_json: str) -> ToolResult:
        """Run one call. Bad JSON, unknown tool, tool error or timeout -> ``status="failed"`` with a message."""
        if name not in self.names():
            return ToolResult(f"unknown tool {name!r}; available: {', '.join(sorted(self.names()))}", "failed")
        try:
            args = json.loads(arguments_json) if arguments_json and arguments_json.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return ToolResult(f"arguments for {name} are not valid JSON: {arguments_json[:200]!r}", "failed")
        if not isinstance(args, dict):
            return ToolResult(f"arguments for {name} must be a JSON object", "failed")
        timeout = self.timeout_for(name)
        try:
            async with asyncio.timeout(timeout):
                return ToolResult(await self._handlers[name](args))
        except TimeoutError:
            return ToolResult(f"{name} timed out after {timeout:g} s", "failed")
        except (_ToolFailure, CalculatorError, TimeZoneError, FetchError, FetchRefused, SearchError) as exc:
            return ToolResult(f"{name} failed: {exc}", "failed")
        except Exception as exc:  # a tool bug must not take the response down; the model sees a failure
            return ToolResult(f"{name} failed unexpectedly: {type(exc).__name__}: {exc}", "failed")

    # -- tools -----------------------------------------------------------------------------------------------

    def search_provider(self) -> SearchProvider:
        if self._search is None:
            c = self.config
            if c.search_provider == "searxng":
                self._search = SearxngSearch(str(c.searxng_url), timeout=self.timeout_for("web_search"))
            elif c.search_provider == "ddgs":
                self._search = DdgsSearch(timeout=self.timeout_for("web_search"))
            else:
                index = Path(c.index_path).expanduser() if c.index_path else default_index_path()
                corpus = DEFAULT_CORPUS if c.corpus is None else (Path(c.corpus).expanduser() if c.corpus else None)
                self._search = EmbeddedSearch(index, corpus)
        return self._search

    async def _web_search(self, args: dict[str, Any]) -> str:
        query = _string_arg(args, "query")
        assert query is not None
        results = await self.search_provider().search(query[:500], self.config.max_results)
        return json.dumps(results, ensure_ascii=False)

    async def _web_fetch(self, args: dict[str, Any]) -> str:
        url = _string_arg(args, "url")
        assert url is not None
        result = await fetch_url(
            url.strip(),
            policy=self.policy,
            max_bytes=self.config.fetch_max_bytes,
            timeout=self.timeout_for("web_fetch"),
        )
        return result.render(self.config.fetch_max_chars)

    async def _calculator(self, args: dict[str, Any]) -> str:
        expression = _string_arg(args, "expression")
        assert expression is not None
        return format_number(evaluate(expression))

    async def _current_datetime(self, args: dict[str, Any]) -> str:
        return describe_datetime(_string_arg(args, "timezone", required=False))
