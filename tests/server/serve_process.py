"""``respstream serve`` in a subprocess on a free loopback port, for the tests that need the real command (two
instances sharing one store, ``kill -9``, restarts, attacks that must not stall the test's own threads): its settings
as a JSON config file (docs/configuration.md), its output in a log file, started once ``/healthz`` answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any, Self

import httpx

from .helpers import free_port

__all__ = ["ServeProcess", "healthy"]


def healthy(url: str, process: subprocess.Popen[Any], seconds: float) -> bool:
    """Polls ``GET url/healthz`` every 50 ms: True once it answers 200; False once ``process`` has exited or
    ``seconds`` have passed without it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)


class ServeProcess:
    """``python -m respstream serve --port P --config <settings as JSON> *args`` with ``env`` added to the
    environment; ``start`` waits (30 s at most) for ``/healthz`` to answer one of ``ready`` (401: the gateway asks
    for a key)."""

    def __init__(self, tmp: Path, settings: dict[str, Any], args: Collection[str] = (), *,
                 env: dict[str, str] | None = None, ready: Collection[int] = (200,)) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = tmp / f"gateway-{self.port}.json"
        self.config.write_text(json.dumps(settings))
        self.args = [sys.executable, "-m", "respstream", "serve", "--port", str(self.port), "--config",
                     str(self.config), *args]
        self.log = tmp / f"gateway-{self.port}.log"
        self.env = {**os.environ, **(env or {})}
        self.ready = ready
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code in self.ready:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"gateway did not answer /healthz within 30 s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM (the gateway's graceful shutdown), SIGKILL if it has not exited within 15 s."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
