"""Items 4 and 8 of issue 13 for ``respstream serve --workers 2``: REAL supervisor and worker processes over
loopback (SIMULATED scripted upstream, shared SQLite store). Every worker has the single gateway's connection guard
(idle and never-finished connections are cut within ``request_timeout_seconds`` and capped, ``/healthz`` keeps
answering), and the same ``--workers 2`` command started twice exits 2 with one line, touching none of the running
group's background responses (no startup recovery under the live workers' ids)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .gateway import Gateway

pytestmark = pytest.mark.timeout(180)


def _workers(tmp: Path, **settings: object) -> Gateway:
    return Gateway(tmp, "--workers", "2", store=f"sqlite:///{tmp}/responses.db", data_dir=str(tmp / "data"),
                   **settings)


def test_slowloris_against_two_workers_is_cut_within_the_header_timeout(tmp_path: Path) -> None:
    with _workers(tmp_path, request_timeout_seconds=2.0, max_connections=100) as gw:
        conns = []
        try:
            for i in range(120):  # the kernel spreads them over both workers (each under its cap of 100)
                s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
                if i % 2:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a head that never ends
                conns.append(s)
            opened = time.monotonic()
            healthy = 0
            for _ in range(10):  # /healthz answers (from either worker) while the idle connections are held
                try:
                    with httpx.Client() as client:
                        if client.get(f"{gw.url}/healthz", timeout=3).status_code == 200:
                            healthy += 1
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            assert healthy >= 5, f"/healthz answered {healthy} of 10 times while idle connections were held"
            for s in conns:  # every idle connection is closed by its worker: EOF or reset within the deadline + slack
                s.settimeout(max(0.1, opened + 2.0 + 4.0 - time.monotonic()))
                try:
                    data = s.recv(1024)
                except ConnectionResetError:
                    data = b""
                except TimeoutError:
                    pytest.fail(f"an idle connection was still open {time.monotonic() - opened:.1f} s after it "
                                "opened (request_timeout_seconds=2)")
                assert data == b"", data[:200]
            assert time.monotonic() - opened < 2.0 + 4.0
        finally:
            for s in conns:
                s.close()
        with httpx.Client() as client:
            assert client.get(f"{gw.url}/healthz", timeout=3).status_code == 200


def test_the_same_workers_command_twice_exits_2_and_touches_nothing(tmp_path: Path) -> None:
    with _workers(tmp_path, upstreams=["scripted:60?delay_ms=50"], instance_id="group", lease_seconds=1.0,
                  dialect="openai") as first:
        created = []
        for _ in range(4):  # spread over both workers (a fresh connection each)
            with httpx.Client() as client:
                r = client.post(f"{first.url}/v1/responses", json={"input": "hi", "background": True,
                                                                    "stream": False}, timeout=10)
            assert r.status_code == 200, r.text
            created.append(r.json()["id"])
        second = Gateway(tmp_path, "--workers", "2", upstreams=["scripted:2"], instance_id="group",
                         store=f"sqlite:///{tmp_path}/responses.db", data_dir=str(tmp_path / "data"))
        second.port = first.port  # the very same command line
        second.args = [*first.args]
        done = subprocess.run(second.args, capture_output=True, text=True, timeout=60, env=second.env)
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("respstream serve: "), done.stderr
        assert "'group'" in lines[0] and "running" in lines[0]
        assert "respstream gateway on" not in done.stdout
        finals = {}
        deadline = time.monotonic() + 40
        while len(finals) < len(created) and time.monotonic() < deadline:
            for rid in created:
                if rid in finals:
                    continue
                with httpx.Client() as client:
                    got = client.get(f"{first.url}/v1/responses/{rid}", timeout=10).json()
                if got["status"] not in ("queued", "in_progress"):
                    finals[rid] = got
            time.sleep(0.2)
    assert len(finals) == len(created), "background responses did not finish"
    for final in finals.values():
        assert final["status"] == "completed", final.get("error")
        assert final["output"][0]["content"][0]["text"]  # the whole answer, not a worker_lost end


def test_port_in_use_with_workers_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Item 18 for --workers: a port held by another program is one line and exit 2 (it was exit 1)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "respstream", "serve", "--port", str(port), "--workers", "2",
                               "--upstream", "scripted:2", "--store", f"sqlite:///{tmp_path}/r.db"],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                              env={**os.environ, "RESPSTREAM_DATA_DIR": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "cannot listen on" in done.stderr, done.stderr
