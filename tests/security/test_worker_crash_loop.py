"""Issue 30 M9: a worker that keeps dying is restarted with a backoff; the other workers keep serving.

Before: the sixth death of one worker within a minute made the supervisor stop every worker and exit 1, so one
crash-looping worker took the whole gateway down. REAL supervisor and worker processes over loopback (SIMULATED
scripted upstream, shared SQLite store); the test kills one worker (SIGKILL) seven times in a row."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from respstream.server.http.workers import MAX_RESTARTS, restart_delay
from server.test_workers import _children

from .gateway import Gateway

pytestmark = pytest.mark.timeout(180)


def test_restart_delay_backs_off_after_the_immediate_restarts() -> None:
    delays = [restart_delay(n) for n in range(1, MAX_RESTARTS + 8)]
    assert delays[:MAX_RESTARTS] == [0.0] * MAX_RESTARTS
    backoff = delays[MAX_RESTARTS:]
    assert backoff[0] > 0 and all(b >= a for a, b in itertools.pairwise(backoff))
    assert restart_delay(1000) == max([*delays, restart_delay(1000)]) < 3600  # bounded


def _wait_for_new_child(supervisor: int, known: set[int], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fresh = _children(supervisor) - known
        if fresh:
            return fresh.pop()
        time.sleep(0.1)
    raise AssertionError(f"no worker was restarted within {timeout} s")


def test_a_crash_looping_worker_does_not_stop_the_others(tmp_path: Path) -> None:
    gw = Gateway(tmp_path, "--workers", "2", store=f"sqlite:///{tmp_path}/responses.db", data_dir=str(tmp_path / "d"))
    with gw:
        assert gw.process is not None
        supervisor = gw.process.pid
        deadline = time.monotonic() + 60
        while len(_children(supervisor)) < 2:
            assert time.monotonic() < deadline, "two workers did not start"
            time.sleep(0.1)
        victim = min(_children(supervisor))
        answered = failed = 0
        for _death in range(MAX_RESTARTS + 2):
            known = _children(supervisor)
            os.kill(victim, signal.SIGKILL)
            victim = _wait_for_new_child(supervisor, known, timeout=30 + restart_delay(MAX_RESTARTS + 2))
            try:
                with httpx.Client() as client:  # the surviving worker answers (a new connection each time)
                    answered += client.get(f"{gw.url}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                failed += 1
        assert gw.process.poll() is None, f"the supervisor exited: {gw.log.read_text()[-1500:]}"
        assert answered >= MAX_RESTARTS and failed <= 2, (answered, failed)
        assert "restarting it in" in gw.log.read_text()  # the last deaths waited a backoff
        with httpx.Client() as client:
            assert client.get(f"{gw.url}/healthz", timeout=5).status_code == 200
