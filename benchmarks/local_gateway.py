"""What the WebSocket benchmarks (websocket_lanes.py, websocket_session.py) share: ``respstream serve`` on a free
loopback port (the openai dialect, the memory store, the upstream they name: a SIMULATED ``scripted:`` one), started
once ``/healthz`` answers; and a client's chain of responses on one socket, each continuing the previous one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from websockets.sync.client import connect

__all__ = ["TERMINALS", "continued_turns", "free_port", "serve"]

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


def continued_turns(port: int, turns: int, *, compression: str | None, timeout: float) -> int:
    """``turns`` responses on one socket to the gateway on ``port``, each ``store: false`` and continuing the one
    before (``previous_response_id``); how many events came (``timeout``: the longest wait for one)."""
    events, previous = 0, None
    with connect(f"ws://127.0.0.1:{port}/v1/responses", max_size=None, compression=compression) as ws:
        for turn in range(turns):
            body = {"type": "response.create", "model": "auto", "store": False, "input": f"turn {turn}"}
            if previous:
                body["previous_response_id"] = previous
            ws.send(json.dumps(body))
            while True:
                event = json.loads(ws.recv(timeout=timeout))
                events += 1
                if event["type"] in TERMINALS:
                    previous = event["response"]["id"]
                    break
    return events
