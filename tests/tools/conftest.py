"""A loopback HTTP server (uvicorn, raw ASGI, own thread) with pages for web_fetch and a SearxNG-shaped /search."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest
import uvicorn

PAGE = (
    b"<html><head><title>Test Page</title><style>body{color:red}</style><script>alert(1)</script></head>"
    b"<body><h1>Hello</h1><p>First &amp; second paragraph.</p><div>Third</div></body></html>"
)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    path = scope["path"]
    query = parse_qs(scope.get("query_string", b"").decode())
    status, headers, body = 404, [(b"content-type", b"text/plain")], b"not found"
    if path == "/page":
        status, headers, body = 200, [(b"content-type", b"text/html; charset=utf-8")], PAGE
    elif path == "/plain":
        status, headers, body = 200, [(b"content-type", b"text/plain")], b"just text"
    elif path == "/big":
        status, headers, body = 200, [(b"content-type", b"text/plain")], b"x" * 50_000
    elif path == "/binary":
        status, headers, body = 200, [(b"content-type", b"image/png")], b"\x89PNG"
    elif path == "/redirect":
        target = query.get("to", ["/page"])[0]
        status, headers, body = 302, [(b"location", target.encode())], b""
    elif path == "/loop":
        status, headers, body = 302, [(b"location", b"/loop")], b""
    elif path == "/slow":
        await asyncio.sleep(5)
        status, headers, body = 200, [(b"content-type", b"text/plain")], b"late"
    elif path == "/search":
        q = query.get("q", [""])[0]
        results = [{"title": f"Result for {q}", "url": "https://example.org/a", "content": "snippet a"}]
        status, headers, body = 200, [(b"content-type", b"application/json")], json.dumps({"results": results}).encode()
    elif path == "/host":
        host = dict(scope["headers"]).get(b"host", b"")
        status, headers, body = 200, [(b"content-type", b"text/plain")], b"host=" + host
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class LoopbackServer:
    def __init__(self) -> None:
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="critical",
            lifespan="off",
            access_log=False,
            ws="none",
            interface="asgi3",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.port = 0

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        ready = threading.Event()
        for _ in range(500):
            if self.server.started:
                break
            ready.wait(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def web() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server
