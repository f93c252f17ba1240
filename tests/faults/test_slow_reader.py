"""A client that stops reading: buffering stays bounded by flow control, other streams are unaffected, and the
stalled stream loses nothing when its reader comes back. Cutting a reader that stays behind is not configurable yet
(xfail below, with the change it needs)."""

from __future__ import annotations

import socket
import time

import pytest

from faults.helpers import GatewayThread, check, gateway_app, stream_post
from respstream.server.upstream.scripted import ScriptedUpstream

BIG = 20_000  # deltas: ~4 MB of frames, far more than the socket buffers hold


def _stalled_client(url: str) -> socket.socket:
    """POST a streaming request on a socket with a tiny receive buffer, read nothing yet."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    body = b'{"input": "a very long answer please"}'
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
    return sock


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    chunks = []
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def _dechunk(raw: bytes) -> bytes:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    out, pos = [], 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2


def test_stalled_reader_does_not_slow_other_streams_and_loses_nothing() -> None:
    upstream = ScriptedUpstream(BIG, name="scripted", models=["scripted"])
    app = gateway_app([upstream])
    with GatewayThread(app) as gw:
        sock = _stalled_client(gw.url)
        try:
            time.sleep(0.3)  # let the gateway fill the socket buffers and block on flow control
            fast = stream_post(gw.url, {"input": "hi", "max_output_tokens": 50})
            assert fast.core.violations == []
            assert fast.core.result.status in ("completed", "incomplete")
            assert fast.seconds < 5, f"a healthy stream took {fast.seconds:.2f} s next to a stalled one"
            raw = _read_all(sock, timeout=20)
        finally:
            sock.close()
    core = check(_dechunk(raw))
    assert core.violations == []
    assert core.result.status == "completed"
    assert len(core.result.streamed_text.split()) == BIG


@pytest.mark.xfail(
    strict=True,
    reason="no config bounds how long a reader may stay behind: Config has no slow-reader limit, EventStreamResponse "
    "(server/sse_response.py) awaits uvicorn's drain() forever and the generation runs on. Needs e.g. "
    "Config.slow_reader_timeout_seconds: a send blocked longer than that ends the stream with a terminal error "
    "(code 'slow_reader') and cancels a foreground generation.",
)
def test_reader_behind_past_the_limit_is_cut_and_generation_cancelled() -> None:
    upstream = ScriptedUpstream(BIG, name="scripted", models=["scripted"], delay_ms=1)
    app = gateway_app([upstream], slow_reader_timeout_seconds=0.5)
    with GatewayThread(app) as gw:
        sock = _stalled_client(gw.url)
        try:
            service = app.state.gateway.service
            deadline = time.monotonic() + 5
            while service.running and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not service.running, "the generation behind a stalled reader was not cancelled"
            raw = _read_all(sock, timeout=5)
        finally:
            sock.close()
    core = check(_dechunk(raw))
    assert core.violations == []
    assert core.result.error is not None and core.result.error["code"] == "slow_reader"


def test_helpers_dechunk_roundtrip() -> None:
    raw = b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert _dechunk(raw) == b"abcde"
