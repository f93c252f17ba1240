"""A real ``respstream serve`` subprocess for the attack tests (so a stalled event loop cannot also stall the test's
own threads through the GIL), and a /healthz watcher that measures how long the gateway takes to answer while an
attack runs. The upstream is the SIMULATED in-process ``scripted:`` one unless a test says otherwise."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from server.serve_process import ServeProcess

__all__ = ["Gateway", "HealthWatch", "loop_thread_cpu_seconds"]

_TICK = os.sysconf("SC_CLK_TCK")


def loop_thread_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the main thread (the event loop's) of process ``pid``, from proc(5)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


class Gateway(ServeProcess):
    """``respstream serve --config <json>`` with ``settings`` as the config (upstreams included: a long scripted
    ``text=`` would not fit on a command line). ``args``: extra CLI arguments."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None, **settings: Any) -> None:
        super().__init__(tmp, {"shutdown_grace_seconds": 0.5, "upstreams": ["scripted:4"], **settings}, args, env=env,
                         ready=(200, 401))


class HealthWatch:
    """Polls ``GET /healthz`` every ``interval`` s on its own connection until stopped; ``worst`` is the slowest
    answer in seconds (a timeout counts as ``timeout``), ``count`` how many answers came.

    ``worst_busy`` is what a stalled event loop shows whatever the machine's load: per poll, the CPU seconds the
    gateway's event-loop thread (its main thread, ``pid``) spent while the answer was awaited, capped at that wait.
    An event loop blocked by a slow regex or parse burns its thread's CPU for as long as /healthz waits; a gateway
    merely descheduled on a busy machine (other processes running) burns almost none. Without ``pid`` it is
    ``worst``."""

    def __init__(self, url: str, *, pid: int | None = None, interval: float = 0.1, timeout: float = 30.0) -> None:
        self.url, self.pid, self.interval, self.timeout = url, pid, interval, timeout
        self.worst = 0.0
        self.worst_busy = 0.0
        self.count = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _loop_cpu(self) -> float | None:
        if self.pid is None:
            return None
        try:
            return loop_thread_cpu_seconds(self.pid)
        except OSError:  # the gateway exited: the answer (or its failure) says so
            return None

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            while True:  # at least one answer, also when the attack ended before the first poll
                started, cpu_before = time.monotonic(), self._loop_cpu()
                try:
                    status = client.get(f"{self.url}/healthz").status_code
                    if status not in (200, 401):
                        self.failures.append(f"HTTP {status}")
                    self.count += 1
                except httpx.HTTPError as exc:
                    self.failures.append(type(exc).__name__)
                waited, cpu_after = time.monotonic() - started, self._loop_cpu()
                self.worst = max(self.worst, waited)
                busy = waited if cpu_before is None or cpu_after is None else min(waited, cpu_after - cpu_before)
                self.worst_busy = max(self.worst_busy, busy)
                if self._stop.wait(self.interval):
                    break

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout + 1)
