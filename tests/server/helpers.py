"""Test helpers for the gateway: SIMULATED router/tools/rewriter, a real uvicorn server on loopback, SSE checks.

The router, tools and rewriter here are test doubles (named Fake*): they implement the interfaces the pipeline
consumes so these tests exercise the HTTP/streaming core with the in-process scripted upstream.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from fakes.server_thread import ServerThread as ServerThread  # re-exported for the server tests
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.base import Upstream
from respstream.server.upstream.scripted import ScriptedUpstream


class FakeModelNotFound(Exception):
    def __init__(self, available: list[str]) -> None:
        super().__init__("model not found")
        self.available = available


@dataclass
class FakeDecision:
    model_id: str
    category: str
    source: str
    reasoning: str
    upstream: Upstream


@dataclass
class FakeRouter:
    """SIMULATED router: model name -> upstream; 'search'/'latest' in the input routes to retrieval."""

    upstreams: dict[str, Upstream]
    failures: list[str] = field(default_factory=list)

    async def route(self, input_text: str, pinned_model: str | None) -> FakeDecision:
        if pinned_model is not None:
            if pinned_model not in self.upstreams:
                raise FakeModelNotFound(sorted(self.upstreams))
            return FakeDecision(pinned_model, "pinned", "router", "pinned", self.upstreams[pinned_model])
        healthy = [m for m in self.upstreams if self.upstreams[m].name not in self.failures]
        model = healthy[0] if healthy else next(iter(self.upstreams))
        category = "retrieval" if "latest" in input_text else "fast"
        return FakeDecision(model, category, "router", f"test policy chose {category}", self.upstreams[model])

    def models(self) -> list[str]:
        return list(self.upstreams)

    def fallback(self, decision: FakeDecision, error: BaseException) -> FakeDecision | None:
        for model, upstream in self.upstreams.items():
            if upstream.name not in self.failures and decision.category != "pinned":
                return FakeDecision(model, decision.category, "fallback", f"{decision.upstream.name} failed", upstream)
        return None

    def record_success(self, upstream: Upstream) -> None:
        return None

    def record_failure(self, upstream: Upstream, error: BaseException) -> None:
        self.failures.append(upstream.name)


@dataclass
class FakeToolResult:
    output: str
    status: str


class FakeTools:
    """SIMULATED server tools with fixed outputs."""

    def specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
                for n in sorted(self.names())]

    def names(self) -> set[str]:
        return {"web_search", "web_fetch", "calculator", "current_datetime"}

    async def run(self, name: str, arguments_json: str) -> FakeToolResult:
        if name == "calculator":
            return FakeToolResult("4", "completed")
        if name == "web_search":
            return FakeToolResult(json.dumps([{"title": "Doc", "url": "https://example.org/doc", "snippet": "x"}]),
                                  "completed")
        return FakeToolResult(f"{name} failed: offline", "failed")


class FakeRewriter:
    """SIMULATED rewriter: replaces words from a table (identity by default)."""

    def __init__(self, table: dict[str, str] | None = None) -> None:
        self.table = table or {}

    async def rewrite(self, text: str, *, language: str | None) -> str:
        for old, new in self.table.items():
            text = text.replace(old, new)
        return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_app(
    *,
    dialect: str = "platform",
    upstreams: Mapping[str, Upstream] | None = None,
    rewriter: FakeRewriter | None = None,
    **config: Any,
) -> Any:
    default: dict[str, Upstream] = {"scripted-a": ScriptedUpstream(8, name="a", models=["scripted-a"])}
    ups = dict(upstreams) if upstreams else default
    cfg = Config(dialect=dialect, upstreams=["scripted:8"], **config)
    comps = Components(router=FakeRouter(ups), tools=FakeTools(), rewriter=rewriter or FakeRewriter())
    return create_app(cfg, comps)


@dataclass
class Decoded:
    status_code: int
    headers: httpx.Headers
    raw: bytes
    core: StreamCore

    @property
    def violations(self) -> list[Any]:
        return self.core.violations

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.payloads()]

    def payloads(self) -> list[dict[str, Any]]:
        out = []
        for block in self.raw.split(b"\n\n"):
            for line in block.split(b"\n"):
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    out.append(json.loads(line[6:]))
        return out


def decode(raw: bytes, *, dialect: str, starting_after: int | None = None) -> StreamCore:
    core = StreamCore(dialect=dialect, starting_after=starting_after)
    core.feed(raw)
    core.close()
    core.events()
    return core


def post_stream(url: str, body: dict[str, Any], *, dialect: str, headers: dict[str, str] | None = None) -> Decoded:
    with httpx.Client(timeout=20) as client:
        # `stream: true` unless the body says otherwise: without it the openai dialects answer JSON (DESIGN §4).
        r = client.post(f"{url}/v1/responses", json={"stream": True, **body}, headers=headers or {})
        raw = r.content
    core = decode(raw, dialect=dialect) if r.status_code == 200 else StreamCore()
    return Decoded(r.status_code, r.headers, raw, core)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def input_tokens_after(client: httpx.Client, rid: str) -> int:
    """``POST /v1/responses/input_tokens`` for a short input continuing ``rid`` (model ``scripted-a``): how many
    input tokens the stored history before it counts."""
    r = client.post("/v1/responses/input_tokens", json={"model": "scripted-a", "input": "x",
                                                        "previous_response_id": rid})
    assert r.status_code == 200, r.text
    count: int = r.json()["input_tokens"]
    return count
