"""Helpers for the fault tests: the real gateway app on a loopback port, real upstream adapters, stream checks.

The gateway runs in-process (uvicorn in a thread) with the real router, pipeline, writer and memory store; only the
model backends are SIMULATED (tests/fakes/chat_server.py's Chat Completions server, or the scripted upstream). No
server tools are offered (``NoTools``) and the rewriter is the identity (``IdentityRewriter``), so a fault is the only
thing that can change a stream.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.http.serving import GatewayServer
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream


class NoTools:
    """A tool registry with no tools (the pipeline's ToolsLike interface)."""

    def specs(self) -> list[dict[str, Any]]:
        return []

    def names(self) -> set[str]:
        return set()

    async def run(self, name: str, arguments_json: str) -> Any:
        raise AssertionError(f"no tool {name} should run in a fault test")


class IdentityRewriter:
    async def rewrite(self, text: str, *, language: str | None) -> str:
        return text


def chat_upstream(url: str, name: str, model: str, **options: Any) -> ChatCompletionsUpstream:
    """A real Chat Completions adapter; no retries by default so each scripted fault is seen once."""
    options.setdefault("retries", 0)
    return ChatCompletionsUpstream(url, name=name, models=[model], **options)


def gateway_app(upstreams: list[Any], **config: Any) -> Any:
    cfg = Config(upstreams=["scripted:1"], **config)
    return create_app(cfg, Components(upstreams=upstreams, tools=NoTools(), rewriter=IdentityRewriter()))


class GatewayThread:
    """uvicorn on 127.0.0.1:<free port> in a daemon thread; ``url`` is the base URL."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", lifespan="on")
        self.server = GatewayServer(config, drain=app.state.gateway.drain)  # stops like `respstream serve`
        self.thread = threading.Thread(target=self.server.run, name="gateway", daemon=True)
        self.app = app
        self.url = ""

    def __enter__(self) -> GatewayThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("gateway did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@dataclass
class Streamed:
    status_code: int
    raw: bytes
    seconds: float
    core: StreamCore

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(line[6:]) for line in self.raw.split(b"\n") if line.startswith(b"data: ")]

    @property
    def error_code(self) -> str | None:
        error = self.core.result.error
        return None if error is None else error.get("code")


def check(raw: bytes, *, dialect: str = "platform", starting_after: int | None = None) -> StreamCore:
    """Run the protocol core over a whole stream (EOF included); callers assert on ``violations``/``result``."""
    core = StreamCore(dialect=dialect, starting_after=starting_after)
    core.feed(raw)
    core.close()
    core.events()
    return core


def stream_post(base: str, body: dict[str, Any], *, dialect: str = "platform", timeout: float = 15.0) -> Streamed:
    started = time.monotonic()
    with httpx.Client(timeout=timeout) as client:
        # `stream: true` unless the body says otherwise: the openai dialects answer JSON without it (DESIGN §4).
        response = client.post(f"{base}/v1/responses", json={"stream": True, **body})
    seconds = time.monotonic() - started
    core = check(response.content, dialect=dialect) if response.status_code == 200 else StreamCore()
    return Streamed(response.status_code, response.content, seconds, core)
