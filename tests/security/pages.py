"""A loopback page server (raw ASGI on a real uvicorn thread) with the hostile pages the web_fetch attacks use."""

from __future__ import annotations

import gzip
from functools import cache
from typing import Any

__all__ = ["GZIP_BOMB_INFLATED", "page_app"]

GZIP_BOMB_INFLATED = 256 << 20  # bytes a bomb inflates to


@cache
def _bomb() -> bytes:
    return gzip.compress(b"\0" * GZIP_BOMB_INFLATED, compresslevel=9)


PAGES: dict[str, tuple[list[tuple[bytes, bytes]], Any]] = {
    # 90 KB of unclosed tags: html.parser rescans the rest for each one (42 s on the event loop at c1c983b).
    "/unclosed": ([(b"content-type", b"text/html")], lambda: b"<a " * 30_000),
    "/bomb": ([(b"content-type", b"text/plain"), (b"content-encoding", b"gzip")], _bomb),
    "/hello": ([(b"content-type", b"text/html")], lambda: b"<html><title>Hi</title><p>hello page</p></html>"),
}


async def page_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    headers, body = PAGES.get(scope["path"], ([(b"content-type", b"text/plain")], lambda: b"not found"))
    data = body()
    await send({"type": "http.response.start", "status": 200 if scope["path"] in PAGES else 404,
                "headers": [*headers, (b"content-length", str(len(data)).encode())]})
    # In pieces, as a real server would send a large body.
    for start in range(0, len(data), 65536):
        await send({"type": "http.response.body", "body": data[start:start + 65536], "more_body": True})
    await send({"type": "http.response.body", "body": b""})
