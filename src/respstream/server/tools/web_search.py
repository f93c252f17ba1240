"""``web_search`` providers. Each returns ``[{title, url, snippet}]`` and raises :class:`SearchError` when it cannot.

- :class:`EmbeddedSearch`: the local SQLite FTS5 index (default; works offline).
- :class:`SearxngSearch`: any SearxNG-compatible endpoint, ``GET {url}/search?q=...&format=json``.
- :class:`DdgsSearch`: DuckDuckGo through the optional ``ddgs`` package, imported only when used.
"""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any, Protocol

import httpx

from respstream.server.tls import client_tls_context
from respstream.server.tools.search_index import DEFAULT_CORPUS, SearchIndex

__all__ = ["DdgsSearch", "EmbeddedSearch", "SearchError", "SearchProvider", "SearxngSearch"]

Results = list[dict[str, str]]


class SearchError(Exception):
    """The provider failed (unreachable, bad answer, not installed). Says which and why."""


class SearchProvider(Protocol):
    name: str

    async def search(self, query: str, limit: int) -> Results: ...


class EmbeddedSearch:
    name = "embedded"

    def __init__(self, index_path: str | Path, corpus: str | Path | None = DEFAULT_CORPUS) -> None:
        self.index = SearchIndex(index_path)
        self.corpus = corpus

    def _search(self, query: str, limit: int) -> Results:
        if self.corpus is not None:
            self.index.ensure_corpus(self.corpus)
        return self.index.search(query, limit)

    async def search(self, query: str, limit: int) -> Results:
        try:
            return await asyncio.to_thread(self._search, query, limit)
        except Exception as exc:  # sqlite3 errors, unreadable corpus
            raise SearchError(f"local search index {self.index.path}: {exc}") from None


class SearxngSearch:
    name = "searxng"

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, limit: int) -> Results:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False, verify=client_tls_context()) as client:
                response = await client.get(f"{self.url}/search", params={"q": query, "format": "json"})
        except httpx.HTTPError as exc:
            raise SearchError(f"SearxNG at {self.url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise SearchError(f"SearxNG at {self.url} answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise SearchError(f"SearxNG at {self.url} did not answer JSON (is format=json enabled?)") from None
        items = data.get("results") if isinstance(data, dict) else None
        out: Results = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("url"):
                out.append(
                    {
                        "title": str(item.get("title") or ""),
                        "url": str(item["url"]),
                        "snippet": str(item.get("content") or ""),
                    }
                )
        return out[:limit]


class DdgsSearch:
    name = "ddgs"

    def __init__(self, *, timeout: float = 10.0) -> None:
        self.timeout = timeout

    def _search(self, query: str, limit: int) -> Results:
        try:
            module: Any = importlib.import_module("ddgs")
        except ImportError:
            raise SearchError("the ddgs package is not installed (pip install ddgs)") from None
        rows = module.DDGS(timeout=int(self.timeout)).text(query, max_results=limit) or []
        return [
            {"title": str(r.get("title", "")), "url": str(r.get("href", "")), "snippet": str(r.get("body", ""))}
            for r in rows
            if isinstance(r, dict)
        ]

    async def search(self, query: str, limit: int) -> Results:
        try:
            return await asyncio.to_thread(self._search, query, limit)
        except SearchError:
            raise
        except Exception as exc:  # ddgs raises its own exception types; no network is also a failure here
            raise SearchError(f"DuckDuckGo search failed: {type(exc).__name__}: {exc}") from None
