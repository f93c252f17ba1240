"""Fixtures for the bounded load tests: a ``respstream serve`` subprocess and the benchmark load generator."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from server.helpers import free_port
from server.serve_process import healthy

ROOT = Path(__file__).resolve().parents[2]


def _load_loadgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("respstream_bench_loadgen", ROOT / "benchmarks" / "loadgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def loadgen() -> ModuleType:
    return _load_loadgen()


class ServeProcess:
    def __init__(self, upstream: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/v1/responses"
        self.proc = subprocess.Popen([sys.executable, "-m", "respstream", "serve", "--port", str(self.port),
                                      "--upstream", upstream], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not healthy(self.base, self.proc, 20):
            self.stop()
            raise RuntimeError("respstream serve did not start")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def serve() -> Iterator[Callable[[str], ServeProcess]]:
    started: list[ServeProcess] = []

    def start(upstream: str) -> ServeProcess:
        proc = ServeProcess(upstream)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
