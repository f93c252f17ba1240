"""TEST DOUBLE: a SIMULATED upstream that speaks the Responses API by replaying recorded transcripts byte for byte.

Not a model and not the gateway: ``POST /v1/responses`` answers with the raw bytes of the transcript named by the
request's ``model`` (``tests/transcripts/<model>.sse``, or one registered with :meth:`add`), whatever their quirks
(no sequence numbers, data-only framing, CRLF, a cut body, an HTML page...), written in ``chunk``-byte pieces on a
connection-close body; ``per_event=True`` writes one SSE event per write instead, a millisecond apart, as a live
server sends its tokens (the reads the gateway's one-event fast paths take). ``POST /v1/responses`` with ``{}`` is
refused with 400 as a real Responses server refuses it (``input`` is required), so the gateway's API probe finds a
Responses API. ``GET /v1/models`` lists every name.
Every request body is recorded (``requests``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FakeResponsesUpstream"]

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "transcripts"


class FakeResponsesUpstream:
    """``base_url`` is ``http://127.0.0.1:<port>/v1``; a context manager."""

    def __init__(self, *, chunk: int = 512, folder: Path = TRANSCRIPTS, per_event: bool = False) -> None:
        self.chunk = chunk
        self.per_event = per_event
        self.bodies: dict[str, bytes] = {p.stem: p.read_bytes() for p in sorted(folder.glob("*.sse"))}
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def add(self, name: str, body: bytes) -> None:
        self.bodies[name] = body

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeResponsesUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeResponsesUpstream
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in self.fake.bodies]})
        else:
            self._json(404, {"error": {"message": f"no route GET {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path != "/v1/responses":
            self._json(404, {"error": {"message": f"no route POST {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        if not isinstance(body, dict) or "input" not in body:
            self._json(400, {"error": {"code": 400, "message": "'input' is required", "type": "invalid_request_error"}})
            return
        with self.fake._lock:
            self.fake.requests.append(body)
            self.fake.headers.append({k.lower(): v for k, v in self.headers.items()})
        data = self.fake.bodies.get(str(body.get("model")))
        if data is None:
            self._json(404, {"error": {"message": f"no transcript {body.get('model')!r}"}})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        step = self.fake.chunk
        pieces = _events(data) if self.fake.per_event else [data[i : i + step] for i in range(0, len(data), step)]
        try:
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                if self.fake.per_event:
                    time.sleep(0.001)  # a live server's pace: each event arrives in its own read
        except (BrokenPipeError, ConnectionResetError):
            pass


def _events(data: bytes) -> list[bytes]:
    """The body split after each blank line (LF or CRLF framing), each piece one SSE event (or comment)."""
    ends = [m.end() for m in re.finditer(rb"\r?\n\r?\n", data)]
    starts = [0, *ends]
    pieces = [data[a:b] for a, b in zip(starts, [*ends, len(data)], strict=True)]
    return [p for p in pieces if p]
