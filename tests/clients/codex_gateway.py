"""The gateway for the Codex CLI cases, run as its own process inside the test's network namespace: the real app
(uvicorn with WebSocket mode, as `respstream serve`) on the SIMULATED scripted upstream, with every request Codex
sends recorded (method, path, the headers that matter, the JSON body after any Content-Encoding) as JSON lines, so
the test can report every field and tool type Codex uses.

Usage: python codex_gateway.py DIALECT PORT RECORD_FILE UPSTREAM [--model-size=SIZE] [--threads=N] [--progress=S]
[ALIAS...] (prints "ready" once it listens). An ALIAS is a model name the gateway serves as ``auto`` (Codex's default
model); SIZE and N the embedded model's (UPSTREAM ``embedded``), S the gateway's ``progress_event_seconds``.

Each request's stream is timed too: a ``timing`` line per response (seconds from the request to its first SSE
event, to its first output item, to its first delta, to its end; the ``keepalive`` events and ``: keep-alive``
comments it carried; its text and usage).
"""

from __future__ import annotations

import gzip
import json
import sys
import time
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
    connection is recorded by its path, then each message the client sends and each event's type)."""

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
            await self.app(scope, self._messages_of(receive), self._events_of(send))
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

        timer = _StreamTimer(send)
        await self.app(scope, replay, timer.send)
        self._write({"type": "timing", "path": scope["path"], **timer.report()})

    def _messages_of(self, receive: Any) -> Any:
        """``receive`` that records each WebSocket message the client sends (its JSON)."""
        async def recording() -> Any:
            message = await receive()
            if message["type"] == "websocket.receive":
                data = message.get("text") or message.get("bytes") or b""
                self._write({"type": "websocket.message", "body": _decode(data.encode() if isinstance(data, str)
                                                                          else data, "")})
            return message
        return recording

    def _events_of(self, send: Any) -> Any:
        """``send`` that records the type (and the small fields) of each WebSocket event the gateway sends."""
        async def recording(message: Any) -> None:
            if message["type"] == "websocket.send" and message.get("text"):
                event = json.loads(message["text"])
                response = event.get("response") or {}
                self._write({"type": "websocket.event", "event": event.get("type"), "id": response.get("id"),
                             "output": len(response.get("output") or []), "usage": response.get("usage"),
                             "headers": event.get("headers"), "error": event.get("error")})
            await send(message)
        return recording

    def _write(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


class _StreamTimer:
    """Wraps ``send``: notes when the response's first event, first output item and end went out, counts its
    keep-alives, and keeps the text it answered (what Codex should print)."""

    def __init__(self, send: Any) -> None:
        self._send, self._start = send, time.monotonic()
        self.marks: dict[str, float] = {}
        self.keepalive_events = self.keepalive_comments = 0
        self._pending = b""  # an event split across body chunks
        self.text: list[str] = []
        self.usage: Any = None

    async def send(self, message: Any) -> None:
        body = message.get("body", b"") if message["type"] == "http.response.body" else b""
        now = round(time.monotonic() - self._start, 2)
        *frames, self._pending = (self._pending + body).split(b"\n\n")
        for frame in frames:
            if frame.startswith(b":"):
                self.keepalive_comments += 1
                continue
            data = b"".join(line[5:].strip() for line in frame.split(b"\n") if line.startswith(b"data:"))
            if not data:
                continue
            event = json.loads(data) if data.startswith(b"{") else {}
            kind = str(event.get("type", ""))
            self.marks.setdefault("first_event", now)
            if kind == "response.output_item.added":
                self.marks.setdefault("first_output_item", now)
            elif kind.endswith(".delta"):  # the first streamed token (text, reasoning or tool arguments)
                self.marks.setdefault("first_delta", now)
            elif kind.endswith("keepalive"):  # the keepalive event of a quiet response (progress_events.py)
                self.keepalive_events += 1
            elif kind == "response.output_text.done":
                self.text.append(event.get("text", ""))
            elif kind in ("response.completed", "response.failed", "response.incomplete"):
                self.usage = (event.get("response") or {}).get("usage")
        await self._send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.marks["end"] = now

    def report(self) -> dict[str, Any]:
        return {**self.marks, "keepalive_events": self.keepalive_events,
                "keepalive_comments": self.keepalive_comments, "text": "".join(self.text), "usage": self.usage}


class _Server(uvicorn.Server):
    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        print("ready", flush=True)


def main() -> None:
    dialect, port, record, upstream = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    options = dict(a[2:].split("=", 1) for a in sys.argv[5:] if a.startswith("--"))
    aliases = [a for a in sys.argv[5:] if not a.startswith("--")]
    models = {"aliases": dict.fromkeys(aliases, "auto")} if aliases else {}
    upstream_options = {"n_threads": int(options["threads"])} if "threads" in options else {}
    config = Config(dialect=dialect, upstreams=[upstream], models=models, upstream_options=upstream_options,
                    model_size=options.get("model-size", "large"),
                    progress_event_seconds=float(options.get("progress", 20.0)))
    app = Recorder(create_app(config), record)
    server = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", access_log=False,
                            ws="websockets-sansio")
    _Server(server).run()


if __name__ == "__main__":
    main()
