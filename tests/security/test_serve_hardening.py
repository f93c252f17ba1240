"""Items 4, 8 and 18 of issue 13, against REAL ``respstream serve`` subprocesses over loopback (SIMULATED scripted
upstream): slow/idle connections before auth are cut and capped; a second process with the same instance id
refuses to start and touches nothing; bad options and a port in use are one line on stderr and exit 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from server.helpers import free_port

from .gateway import Gateway


def _serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "respstream", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args", [
    ["--upstream", "bogus"],
    ["--upstream", "scripted:2", "--store", "postgres://x"],
    ["--upstream", "scripted:2", "--port", "99999"],
], ids=["bogus-upstream", "postgres-store", "port-99999"])
def test_bad_options_are_one_line_and_exit_2(args: list[str]) -> None:
    if "--port" not in args:
        args = [*args, "--port", str(free_port())]
    done = _serve(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "respstream gateway on" not in done.stdout  # no banner for a gateway that never ran
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("respstream serve: "), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = _serve("--upstream", "scripted:2", "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2
    assert "respstream gateway on" not in done.stdout
    assert done.stderr.strip().count("\n") == 0 and "cannot listen on" in done.stderr, done.stderr


def test_second_process_with_the_same_instance_id_touches_nothing(tmp_path: Path) -> None:
    """Item 8: the duplicate used to run startup recovery under the live instance's id (its background responses
    ended ``worker_lost``) before failing."""
    with Gateway(tmp_path, "--dialect", "openai", upstreams=["scripted:60?delay_ms=50"], instance_id="same-id",
                 lease_seconds=1.0) as first:
        created = httpx.post(f"{first.url}/v1/responses", json={"input": "hi", "background": True, "stream": False},
                             timeout=10).json()
        second = Gateway(tmp_path, "--dialect", "openai", upstreams=["scripted:2"], instance_id="same-id")
        done = subprocess.run(second.args, capture_output=True, text=True, timeout=30, env=second.env)
        assert done.returncode == 2, done.stderr
        assert "same-id" in done.stderr and "running" in done.stderr
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            final = httpx.get(f"{first.url}/v1/responses/{created['id']}", timeout=10).json()
            if final["status"] not in ("queued", "in_progress"):
                break
            time.sleep(0.2)
    assert final["status"] == "completed", final


def _open_idle(port: int, count: int) -> list[socket.socket]:
    conns = []
    for i in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a head that never ends
        conns.append(s)
    return conns


def test_slowloris_connections_are_cut_and_capped(tmp_path: Path) -> None:
    """Item 4: idle and never-finished connections (before any auth) are closed after request_timeout_seconds,
    and past max_connections a new one is closed at once, so descriptors stay bounded and /healthz recovers."""
    with Gateway(tmp_path, request_timeout_seconds=2.0, max_connections=100) as gw:
        assert gw.process is not None
        conns = _open_idle(gw.port, 300)
        try:
            time.sleep(0.5)  # let the accept loop catch up with the burst
            fds = len(os.listdir(f"/proc/{gw.process.pid}/fd"))
            assert fds < 100 + 60, f"{fds} descriptors open for 300 idle connections with max_connections=100"
            started = time.monotonic()
            while True:  # recovers once the idle ones are cut
                try:
                    if httpx.get(f"{gw.url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() - started < 6, "/healthz did not recover"
                time.sleep(0.1)
            for s in conns[:20]:  # the server closed them (EOF or reset); a socket.timeout here fails the test
                s.settimeout(5)
                try:
                    data = s.recv(1024)
                except ConnectionResetError:
                    data = b""
                assert data == b""
        finally:
            for s in conns:
                s.close()
    assert gw.log.stat().st_size < 100_000  # no log flood


def test_a_down_upstream_is_named_in_a_503_not_model_not_found(tmp_path: Path) -> None:
    """Item 19 (part): an upstream that is down at start used to give 400 model_not_found "Available: " (empty)."""
    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with Gateway(tmp_path, upstreams=[down]) as gw:
        r = httpx.post(f"{gw.url}/v1/responses", json={"input": "hi", "stream": False}, timeout=30)
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_unavailable" and "127.0.0.1" in error["message"], error
    assert "retry-after" in r.headers


@pytest.mark.parametrize("stack", ["pure", "auto"])
def test_request_deadline_does_not_cut_websockets_or_slow_answers(tmp_path: Path, stack: str) -> None:
    """The read deadline covers reading the request only: a WebSocket held open past it, and a stream that runs
    longer than it, are not cut (h11 and httptools protocols alike)."""
    from websockets.sync.client import connect

    with Gateway(tmp_path, upstreams=["scripted:30?delay_ms=100"], request_timeout_seconds=1.0,
                 http_stack=stack) as gw:
        slow = httpx.post(f"{gw.url}/v1/responses", json={"input": "hi", "stream": True}, timeout=20)
        assert slow.status_code == 200 and slow.text.count("output_text.delta") == 30
        with connect(f"ws://127.0.0.1:{gw.port}/v1/responses", open_timeout=5) as ws:
            time.sleep(2.0)  # idle past request_timeout_seconds
            ws.send('{"type": "response.create", "input": "hi"}')
            first = ws.recv(timeout=10)
        assert "response." in str(first)
