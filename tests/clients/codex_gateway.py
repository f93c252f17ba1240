"""The gateway for the Codex CLI cases, run as its own process inside the test's network namespace: the real app
(uvicorn with WebSocket mode, as `respstream serve`) on the SIMULATED scripted upstream, with every request Codex
sends recorded (method, path, the headers that matter, the JSON body after any Content-Encoding) as JSON lines, so
the test can report every field and tool type Codex uses.

Usage: python codex_gateway.py DIALECT PORT RECORD_FILE UPSTREAM [ALIAS...]   (prints "ready" once it listens)
An ALIAS is a model name the gateway serves as ``auto`` (Codex's default model).
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from typing import Any

import uvicorn

from respstream.server.config import Config
from respstream.server.http.app import create_app

_HEADERS = ("content-encoding", "content-type", "accept", "session-id", "thread-id", "conversation_id",
            "session_id", "originator", "openai-beta", "version", "user-agent")


def _decode(body: bytes, encoding: str) -> Any:
    if encoding == "zstd":
        import zstandard

        body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
    elif encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    try:
        return json.loads(body) if body else None
    except ValueError:
        return {"undecodable": body[:200].decode("latin-1")}


class Recorder:
    """ASGI wrapper: passes everything through unchanged and appends each HTTP request to ``path`` (a WebSocket
    connection is recorded by its path; its messages are not)."""

    def __init__(self, app: Any, path: str) -> None:
        self.app, self.path = app, path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        entry: dict[str, Any] = {"type": scope["type"], "method": scope.get("method"), "path": scope["path"],
                                 "headers": {k: v for k, v in headers.items() if k in _HEADERS}}
        if scope["type"] == "websocket":
            self._write(entry)
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        messages: list[Any] = []
        while True:
            message = await receive()
            messages.append(message)
            chunks.append(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        entry["body"] = _decode(b"".join(chunks), headers.get("content-encoding", ""))
        self._write(entry)

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    def _write(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


class _Server(uvicorn.Server):
    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        print("ready", flush=True)


def main() -> None:
    dialect, port, record, upstream, aliases = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
    models = {"aliases": dict.fromkeys(aliases, "auto")} if aliases else {}
    app = Recorder(create_app(Config(dialect=dialect, upstreams=[upstream], models=models)), record)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", access_log=False,
                            ws="websockets-sansio")
    _Server(config).run()


if __name__ == "__main__":
    main()
