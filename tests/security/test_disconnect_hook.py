"""Issue 41: a streaming client that goes away still stops its foreground generation, on both HTTP stacks.

On the httptools stack the gateway's protocol calls the stream's hook when the connection is lost
(http_guard.DISCONNECT_HOOK): no watcher task per stream. On h11 a watcher task reads ``receive()`` as before. The
SIMULATED scripted upstream would take 10 s to answer; the response must end ``cancelled`` long before that, and a
normal stream on the same gateway must still complete."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from .gateway import Gateway

BODY = json.dumps({"model": "auto", "input": "hi", "stream": True}).encode()


def _open_stream(port: int) -> tuple[socket.socket, str]:
    """A streaming POST on a raw socket, read until its first event; (the socket, the response id)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
    got = b""
    while b"\r\n\r\n" not in got or b"data:" not in got:
        chunk = sock.recv(65536)
        assert chunk, got[:300]
        got += chunk
    head = got.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    assert head.startswith("http/1.1 200"), head
    rid = next(line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.startswith("x-response-id:"))
    return sock, rid


@pytest.mark.parametrize("stack", ["auto", "pure"])
def test_a_client_that_goes_away_stops_its_generation(tmp_path: Path, stack: str) -> None:
    with Gateway(tmp_path, http_stack=stack, upstreams=["scripted:200?delay_ms=50"]) as gw:
        sock, rid = _open_stream(gw.port)
        sock.close()
        status, deadline = None, time.monotonic() + 8  # the generation alone would take 10 s
        while time.monotonic() < deadline:
            status = httpx.get(f"{gw.url}/v1/responses/{rid}", timeout=5).json()["status"]
            if status != "in_progress":
                break
            time.sleep(0.05)
        assert status == "cancelled", status
        with httpx.stream("POST", f"{gw.url}/v1/responses", json={"model": "auto", "input": "hi", "stream": True},
                          timeout=30) as answer:  # a stream that stays to its end is not cut by the hook
            text = answer.read().decode()
        assert "response.completed" in text or '"status":"completed"' in text, text[-500:]
