"""Gateways for the background tests: `respstream serve` subprocesses on random loopback ports (for two instances
sharing one Redis, `kill -9`, restarts), and SSE helpers. The upstream is the SIMULATED in-process `scripted:` one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from respstream.protocol.stream import StreamCore
from server.helpers import free_port

__all__ = ["GatewayProcess", "frames", "stream_core", "wait_status"]


class GatewayProcess:
    """``respstream serve`` in a subprocess; ``settings`` become its JSON config file (docs/configuration.md)."""

    def __init__(self, tmp: Path, *, store: str, upstream: str = "scripted:300?delay_ms=5",
                 dialect: str = "platform", **settings: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = tmp / f"gateway-{self.port}.json"
        # A short shutdown grace: a test ending with background work still running should not wait 5 s for it.
        self.config.write_text(json.dumps({"lease_seconds": 1.0, "keepalive_seconds": 1.0,
                                           "shutdown_grace_seconds": 0.5, **settings}))
        self.args = [sys.executable, "-m", "respstream", "serve", "--port", str(self.port), "--config",
                     str(self.config), "--store", store, "--upstream", upstream, "--dialect", dialect]
        self.log = tmp / f"gateway-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> GatewayProcess:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"gateway did not answer /healthz within 30 s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """``kill -9``: no shutdown code runs, leases are left to expire."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def frames(raw: bytes) -> list[bytes]:
    """The event frames of an SSE body (keep-alive comments dropped)."""
    return [block for block in raw.split(b"\n\n") if block and not block.startswith(b":")]


def stream_core(raw: bytes, *, dialect: str = "platform", starting_after: int | None = None) -> StreamCore:
    core = StreamCore(dialect=dialect, starting_after=starting_after)
    core.feed(raw)
    core.close()
    core.events()
    return core


def wait_status(client: httpx.Client, url: str, rid: str, statuses: set[str], timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = client.get(f"{url}/v1/responses/{rid}").json()
        if body.get("status") in statuses:
            return body
        time.sleep(0.05)
    raise AssertionError(f"{rid} never reached {statuses}: {body.get('status')}")
