"""A client that stops reading: buffering stays bounded by flow control, other streams and the generation are
unaffected, the stalled stream loses nothing when its reader comes back in time, and a reader that stays behind past
``slow_reader_timeout_seconds`` is cut with a terminal ``error`` ``slow_reader`` (a foreground generation is
cancelled, a background one runs on for resumers) or, if it will not even take that, disconnected.

The stalled client is a raw socket with a 4 KiB receive buffer that reads nothing; the answers are big (kilobyte
deltas) so the kernel buffers and uvicorn's write buffer fill within a fraction of a second. The limit is the config
key ``slow_reader_timeout_seconds``; the grace a cut reader gets is ``stream_timer.SLOW_READER_GRACE_SECONDS``.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import pytest

from faults.helpers import GatewayThread, check, gateway_app, stream_post
from respstream.server.http import sse_response, stream_timer
from respstream.server.upstream.scripted import ScriptedUpstream

BIG = 20_000  # deltas: ~4 MB of frames, far more than the socket buffers hold
# 20 KB deltas 5 ms apart (4 MB/s): loopback buffers take ~3 MB before a send blocks, so that happens within ~1 s
CHUNK = "x" * 20_000


def _stalled_client(url: str, body: bytes = b'{"input": "a very long answer please", "stream": true}') -> socket.socket:
    """POST a streaming request on a socket with a tiny receive buffer, read nothing yet."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
    return sock


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    chunks: list[bytes] = []
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def _dechunk(raw: bytes) -> bytes:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    out: list[bytes] = []
    pos = 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2


def _response_id(raw: bytes) -> str:
    head = raw.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
    line = next(x for x in head.split("\r\n") if x.startswith("x-response-id:"))
    return line.split(":", 1)[1].strip()


def _wait(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


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
            # Held behind the stalled reader it would never end (that reader reads nothing until below): any end
            # well inside the client's 15 s timeout proves it was not, also on a busy machine.
            assert fast.seconds < 12, f"a healthy stream took {fast.seconds:.2f} s next to a stalled one"
            raw = _read_all(sock, timeout=20)
        finally:
            sock.close()
    core = check(_dechunk(raw))
    assert core.violations == []
    assert core.result.status == "completed"
    assert len(core.result.streamed_text.split()) == BIG


def test_reader_behind_past_the_limit_is_cut_and_generation_cancelled() -> None:
    upstream = ScriptedUpstream(800, name="scripted", models=["scripted"], delay_ms=5, text=CHUNK * 800)
    small = ScriptedUpstream(20, name="small", models=["small"])
    app = gateway_app([upstream, small], slow_reader_timeout_seconds=0.5)
    with GatewayThread(app) as gw:
        service = app.state.gateway.svc
        sock = _stalled_client(gw.url)
        try:
            _wait(lambda: service.running, 5, "the response never started")
            # A healthy stream is served while the stalled one waits for the limit.
            fast = stream_post(gw.url, {"input": "hi", "model": "small"})
            assert fast.core.violations == [] and fast.core.result.status == "completed"
            # 800 deltas 5 ms apart cannot finish in 4 s: an empty `running` means it was cancelled.
            _wait(lambda: not service.running, 4, "the generation behind a stalled reader was not cancelled")
            raw = _read_all(sock, timeout=5)
        finally:
            sock.close()
        record = httpx.get(f"{gw.url}/v1/responses/{_response_id(raw)}").json()
        log = httpx.get(f"{gw.url}/v1/responses/{_response_id(raw)}?stream=true").content
    # The response itself ended because its only reader was too slow: the stored log says so (not "disconnected").
    assert record["status"] == "failed"
    stored = check(log)
    assert stored.result.error is not None and stored.result.error["code"] == "slow_reader"
    core = check(_dechunk(raw))
    assert core.violations == []
    assert core.result.error is not None and core.result.error["code"] == "slow_reader"
    assert "slow_reader_timeout_seconds" in core.result.error["message"]
    assert 0 < len(core.result.streamed_text) < len(CHUNK) * 800  # cut part way


def test_background_generation_outlives_its_cut_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_timer, "SLOW_READER_GRACE_SECONDS", 20.0)  # the cut reader may come back late
    cut = threading.Event()
    original = sse_response.EventStreamResponse._cut

    async def observed_cut(self: Any, send: Any, limit: float) -> None:
        cut.set()
        await original(self, send, limit)

    monkeypatch.setattr(sse_response.EventStreamResponse, "_cut", observed_cut)
    upstream = ScriptedUpstream(300, name="scripted", models=["scripted"], delay_ms=5, text=CHUNK * 300)
    app = gateway_app([upstream], slow_reader_timeout_seconds=0.5)
    with GatewayThread(app) as gw:
        service = app.state.gateway.svc
        sock = _stalled_client(gw.url, b'{"input": "long please", "background": true, "stream": true}')
        try:
            assert cut.wait(10), "the stalled reader was not cut"
            _wait(lambda: not service.running, 15, "the background generation did not finish")
            raw = _read_all(sock, timeout=10)
        finally:
            sock.close()
        rid = _response_id(raw)
        record = httpx.get(f"{gw.url}/v1/responses/{rid}").json()
        core = check(_dechunk(raw))
        assert core.result.error is not None and core.result.error["code"] == "slow_reader"
        # Nothing was lost for a resumer: the rest of the log is there after the last event this reader got.
        last = core.last_sequence_number
        assert last is not None
        resumed = httpx.get(f"{gw.url}/v1/responses/{rid}", params={"stream": "true", "starting_after": last - 1},
                            timeout=15)
    assert record["status"] == "completed"
    assert core.violations == []
    rest = check(resumed.content, starting_after=last - 1)
    assert rest.violations == []
    assert rest.result.status == "completed"
    assert len(core.result.streamed_text) < len(CHUNK) * 300 == len(record["output"][0]["content"][0]["text"])


def test_reader_that_never_reads_is_disconnected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_timer, "SLOW_READER_GRACE_SECONDS", 0.3)
    upstream = ScriptedUpstream(800, name="scripted", models=["scripted"], delay_ms=5, text=CHUNK * 800)
    app = gateway_app([upstream], slow_reader_timeout_seconds=0.3)
    gateway = app.state.gateway
    with GatewayThread(app) as gw:
        sock = _stalled_client(gw.url)
        try:
            _wait(lambda: gateway.gate.open == 1, 5, "the stream never opened")
            # Cut after ~0.3 s, refused its terminal for another 0.3 s: the connection is aborted, the slot freed.
            _wait(lambda: gateway.gate.open == 0, 5, "a reader that never reads kept its stream open")
            _wait(lambda: not gateway.svc.running, 5, "its generation was not cancelled")
            raw = _read_all(sock, timeout=5)  # what the kernel had buffered, then the server's close
        finally:
            sock.close()
    assert raw.startswith(b"HTTP/1.1 200")
    assert not raw.endswith(b"0\r\n\r\n") and b"slow_reader" not in raw  # closed, not ended: it never took more


def test_helpers_dechunk_roundtrip() -> None:
    raw = b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert _dechunk(raw) == b"abcde"
