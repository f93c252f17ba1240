"""``respstream serve --workers N``: real processes on one port (SO_REUSEPORT), any worker serves any response
(shared SQLite store), distinct instance ids, the memory store refused, SIGTERM drains and stops every worker.
Upstream: the SIMULATED scripted backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from respstream.server.config import Config
from respstream.server.http.workers import WorkerError, check_workers

from .helpers import decode, free_port

pytestmark = pytest.mark.timeout(120)


def _children(pid: int) -> set[int]:
    """The worker processes of supervisor ``pid`` (not multiprocessing's resource tracker, which exits by itself)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmdline:
                found.add(int(entry.name))
    return found


def test_memory_store_with_more_than_one_worker_is_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match="memory store lives inside one process"):
        check_workers(Config(store="memory"), 2)
    check_workers(Config(store="memory"), 1)
    env = {**os.environ, "RESPSTREAM_DATA_DIR": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-m", "respstream", "serve", "--port", str(free_port()), "--upstream",
                          "scripted:3", "--workers", "2"], capture_output=True, text=True, timeout=60, env=env)
    assert ran.returncode == 2
    assert "--workers 2 needs a store every worker shares" in ran.stderr and "--store sqlite:///" in ran.stderr


def test_two_workers_share_the_port_and_every_response(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RESPSTREAM_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "respstream", "serve", "--port", str(port), "--upstream",
                             "scripted:12?delay_ms=5", "--workers", "2", "--store", f"sqlite:///{tmp_path}/r.db"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        ids: set[str] = set()
        deadline = time.monotonic() + 60
        while len(ids) < 2:  # new connections are spread by the kernel: both workers answer sooner or later
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, f"only {ids} answered"
            try:
                with httpx.Client() as client:  # a fresh connection each time
                    health = client.get(f"{base}/healthz", timeout=2)
                if health.status_code == 200:
                    ids.add(health.json()["instance_id"])
            except httpx.HTTPError:
                time.sleep(0.1)
        assert len(ids) == 2 and all(i.endswith(("-w0", "-w1")) for i in ids)
        assert len({i.rsplit("-w", 1)[0] for i in ids}) == 1  # one gateway, two workers of it
        workers = _children(proc.pid)
        assert len(workers) >= 2

        made: dict[str, str] = {}  # response id -> instance that made it
        for _ in range(12):
            with httpx.Client() as client:
                created = client.post(f"{base}/v1/responses", json={"input": "hi", "background": True}, timeout=20)
            assert created.status_code == 200, created.text
            made[created.json()["id"]] = ""
        for rid in made:
            for _attempt in range(3):  # read and resume each through fresh connections (any worker)
                with httpx.Client() as client:
                    got = client.get(f"{base}/v1/responses/{rid}", timeout=20)
                    assert got.status_code == 200, got.text
                    full = client.get(f"{base}/v1/responses/{rid}", params={"stream": "true"}, timeout=20)
                assert full.status_code == 200
                result = decode(full.content, dialect="platform")
                assert result.violations == [] and result.result.status == "completed"
        first, second = list(made)[:2]
        with httpx.Client() as client:
            resumed = client.get(f"{base}/v1/responses/{first}", params={"stream": "true", "starting_after": "3"},
                                 timeout=20)
        assert resumed.status_code == 200 and b'"sequence_number":3,' not in resumed.content
        assert b'"sequence_number":4,' in resumed.content
        for _attempt in range(2):
            with httpx.Client() as client:
                deleted = client.delete(f"{base}/v1/responses/{second}", timeout=20)
            assert deleted.status_code in (200, 404)
        with httpx.Client() as client:
            assert client.get(f"{base}/v1/responses/{second}", timeout=20).status_code == 404

        # /metrics of whichever worker answers counts the responses of both (prometheus multiprocess mode).
        for _attempt in range(4):
            with httpx.Client() as client:
                text = client.get(f"{base}/metrics", timeout=20).text
            finished = sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
                           if s.name == "respstream_responses_total")
            assert finished == len(made), text[:2000]

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
        for pid in workers:
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
