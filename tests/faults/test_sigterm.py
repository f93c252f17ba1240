"""SIGTERM to a ``respstream serve`` subprocess: stop accepting, end open streams, keep background work.

The gateway runs as a real process (sqlite store in a temp folder, the SIMULATED scripted upstream with a delay so
responses are mid-flight when the signal lands, ``shutdown_grace_seconds = 1``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from faults.helpers import check
from server.helpers import free_port
from server.serve_process import healthy

GRACE = 1.0
SERVE = [sys.executable, "-m", "respstream", "serve"]


class Gateway:
    def __init__(self, tmp: Path, upstream: str, dialect: str = "platform") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = tmp / "gateway.toml"
        config.write_text(f"shutdown_grace_seconds = {GRACE}\ndialect = \"{dialect}\"\n")
        self.proc = subprocess.Popen(
            [*SERVE, "--port", str(self.port), "--config", str(config), "--store", f"sqlite:///{tmp / 'store.db'}",
             "--upstream", upstream],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        if not healthy(self.url, self.proc, 20):
            self.kill()
            raise RuntimeError("gateway did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


@dataclass
class Reader:
    """A foreground stream read in a thread; ``first`` is set once some events arrived."""

    url: str
    raw: bytearray = field(default_factory=bytearray)
    first: threading.Event = field(default_factory=threading.Event)
    ended_at: float | None = None

    def run(self) -> None:
        try:
            with httpx.Client(timeout=30) as client, client.stream(
                "POST", f"{self.url}/v1/responses", json={"input": "tell me a long story", "stream": True}
            ) as response:
                for chunk in response.iter_bytes():
                    self.raw += chunk
                    if self.raw.count(b"\n\n") >= 5:
                        self.first.set()
        except httpx.HTTPError:
            pass  # a cut connection is what the test inspects
        finally:
            self.ended_at = time.monotonic()
            self.first.set()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    gw = Gateway(tmp_path, "scripted:600?delay_ms=10")
    try:
        yield gw
    finally:
        gw.kill()


def _start_reader(gw: Gateway) -> tuple[Reader, threading.Thread]:
    reader = Reader(gw.url)
    thread = threading.Thread(target=reader.run, daemon=True)
    thread.start()
    assert reader.first.wait(10), "the foreground stream did not start"
    return reader, thread


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


def test_sigterm_stops_accepting_and_background_work_resumes_after_restart(gateway: Gateway, tmp_path: Path) -> None:
    created = httpx.post(f"{gateway.url}/v1/responses", json={"input": "hi", "background": True}, timeout=10)
    assert created.status_code == 200
    rid = created.json()["id"]
    _reader, thread = _start_reader(gateway)
    gateway.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 2
    while not _refused(gateway.port) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _refused(gateway.port), "new connections are still accepted after SIGTERM"
    assert gateway.proc.wait(timeout=GRACE + 10) == 0  # exits after its grace, without hanging (a busy machine
    # may stretch the interpreter's shutdown by seconds: the wait's own bound is the test's)
    thread.join(timeout=5)
    assert not thread.is_alive(), "a client stream hangs after the server exited"

    # Restart on the same sqlite file: the background response is there, ended, and resumable from any cursor.
    again = Gateway(tmp_path, "scripted:4")
    try:
        record = httpx.get(f"{again.url}/v1/responses/{rid}", timeout=10).json()
        assert record["error"]["code"] == "server_shutdown"
        full = httpx.get(f"{again.url}/v1/responses/{rid}", params={"stream": "true"}, timeout=10)
        core = check(full.content)
        assert core.violations == []
        assert core.result.error is not None and core.result.error["code"] == "server_shutdown"
        last = core.result.last_sequence_number
        assert last is not None and last > 5
        tail = httpx.get(f"{again.url}/v1/responses/{rid}", params={"stream": "true", "starting_after": "3"},
                         timeout=10)
        tail_core = check(tail.content, starting_after=3)
        assert tail_core.violations == []
        assert tail_core.result.last_sequence_number == last
        done = httpx.get(f"{again.url}/v1/responses/{rid}", params={"stream": "true", "starting_after": str(last)},
                         timeout=10)
        assert done.status_code == 204
    finally:
        again.kill()


@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_sigterm_ends_open_streams_with_server_shutdown_at_once(tmp_path: Path, dialect: str) -> None:
    gateway = Gateway(tmp_path, "scripted:600?delay_ms=10", dialect)
    try:
        reader, thread = _start_reader(gateway)
        sent = time.monotonic()
        gateway.proc.send_signal(signal.SIGTERM)
        thread.join(timeout=GRACE + 10)
        assert reader.ended_at is not None
        # Foreground streams do not wait for the background grace period: they end as soon as the signal is seen.
        assert reader.ended_at - sent < GRACE, f"stream ended {reader.ended_at - sent:.2f} s after SIGTERM"
        assert gateway.proc.wait(timeout=GRACE + 10) == 0
    finally:
        gateway.kill()
    core = check(bytes(reader.raw), dialect=dialect)
    assert core.violations == []
    assert core.result.error is not None and core.result.error["code"] == "server_shutdown"
    payloads = [json.loads(line[6:]) for line in bytes(reader.raw).split(b"\n") if line.startswith(b"data: ")]
    if dialect == "openai":
        assert [p["type"] for p in payloads[-2:]] == ["error", "response.failed"]
        assert payloads[-2]["error"]["code"] == "server_shutdown"  # nested error object
        assert payloads[-1]["response"]["error"]["code"] == "server_shutdown"
    else:
        assert payloads[-1]["type"] == "error" and payloads[-1]["code"] == "server_shutdown"  # flat error


def test_background_work_that_finishes_within_the_grace_period_completes(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, "scripted:40?delay_ms=10")  # ~0.4 s of work, well inside the 1 s grace
    try:
        created = httpx.post(f"{gateway.url}/v1/responses", json={"input": "hi", "background": True}, timeout=10)
        rid = created.json()["id"]
        gateway.proc.send_signal(signal.SIGTERM)
        assert gateway.proc.wait(timeout=GRACE + 10) == 0
    finally:
        gateway.kill()
    again = Gateway(tmp_path, "scripted:4")
    try:
        record = httpx.get(f"{again.url}/v1/responses/{rid}", timeout=10).json()
        assert record["status"] == "completed", record.get("error")
        core = check(httpx.get(f"{again.url}/v1/responses/{rid}", params={"stream": "true"}, timeout=10).content)
        assert core.violations == [] and core.result.status == "completed"
    finally:
        again.kill()
