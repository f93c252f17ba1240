"""``respstream serve`` on a free loopback port for the WebSocket benchmarks (websocket_lanes.py,
websocket_session.py): the openai dialect, the memory store, the upstream they name (a SIMULATED ``scripted:``
one), started once ``/healthz`` answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["TERMINALS", "free_port", "serve"]

TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(port: int, upstream: str) -> Iterator[subprocess.Popen[bytes]]:
    """The gateway on ``port`` in front of ``upstream``, healthy (30 s at most, else SystemExit), stopped (SIGTERM)
    when the block ends."""
    exe = Path(sys.executable).with_name("respstream")
    proc = subprocess.Popen([str(exe), "serve", "--port", str(port), "--upstream", upstream,
                             "--dialect", "openai", "--store", "memory", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.terminate()
            raise SystemExit("the gateway did not start")
        time.sleep(0.1)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)
