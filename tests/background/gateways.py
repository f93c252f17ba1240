"""Gateways for the background tests: `respstream serve` subprocesses on random loopback ports (for two instances
sharing one Redis, `kill -9`, restarts), and SSE helpers. The upstream is the SIMULATED in-process `scripted:` one."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from respstream.protocol.stream import StreamCore
from server.serve_process import ServeProcess

T = TypeVar("T")

__all__ = ["GatewayProcess", "frames", "interrupted", "stream_core", "wait_status"]


class GatewayProcess(ServeProcess):
    """``respstream serve`` in a subprocess; ``settings`` become its JSON config file (docs/configuration.md)."""

    def __init__(self, tmp: Path, *, store: str, upstream: str = "scripted:300?delay_ms=5",
                 dialect: str = "platform", **settings: Any) -> None:
        # A short shutdown grace: a test ending with background work still running should not wait 5 s for it.
        super().__init__(tmp, {"lease_seconds": 1.0, "keepalive_seconds": 1.0, "shutdown_grace_seconds": 0.5,
                               **settings}, ("--store", store, "--upstream", upstream, "--dialect", dialect))

    def kill(self) -> None:
        """``kill -9``: no shutdown code runs, leases are left to expire."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None


def frames(raw: bytes) -> list[bytes]:
    """The event frames of an SSE body (keep-alive comments dropped)."""
    return [block for block in raw.split(b"\n\n") if block and not block.startswith(b":")]


def interrupted(live: httpx.Response, deltas: int, action: Callable[[], T]) -> tuple[bytes, T, float]:
    """Read the raw SSE stream ``live`` until ``deltas`` text deltas came, run ``action`` (the interruption: a kill,
    a cancel, a delete, a store going away), then read on to the stream's end: (every byte read, what ``action``
    returned, seconds from ``action``'s return to the stream's end)."""
    seen = b""
    chunks = live.iter_raw()
    while seen.count(b"output_text.delta") < deltas:
        seen += next(chunks)
    result = action()
    started = time.monotonic()
    for chunk in chunks:  # the stream must end by itself
        seen += chunk
    return seen, result, time.monotonic() - started


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
