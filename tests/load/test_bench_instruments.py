"""The throughput benchmark's instruments measure what they say (benchmarks/procstat.py, server_throughput.py).

The SIMULATED fake upstream's pre-encoded script must put the same bytes on the wire as the per-chunk script it
replaced, or the gateway-http figure would compare different streams; the /proc counters must move with real work.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> tuple[ModuleType, ModuleType]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("server_throughput"), importlib.import_module("procstat")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def steps_module(bench: tuple[ModuleType, ModuleType]) -> ModuleType:
    """The fake server's module as the benchmark imports it (``tests.fakes.chat_server``, from the repository root):
    its step classes, not this test's ``fakes.chat_server`` copies, are what the benchmark's isinstance checks see."""
    bench[0].fake_upstream_steps()  # puts the repository root on sys.path, as the benchmark does
    return importlib.import_module("tests.fakes.chat_server")


def _body(wire: ModuleType, steps: list[object]) -> bytes:
    server = wire.FakeChatCompletionsServer(models=["fake-model"])
    server.script(*steps)  # type: ignore[arg-type]
    server.start()
    try:
        reply = httpx.post(f"http://127.0.0.1:{server.port}/v1/chat/completions", timeout=30,
                           json={"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "x"}]})
        assert reply.status_code == 200
        return reply.content
    finally:
        server.stop()


def test_pre_encoded_upstream_sends_the_same_bytes_as_the_per_chunk_script(
    bench: tuple[ModuleType, ModuleType], steps_module: ModuleType
) -> None:
    throughput, _ = bench
    steps = throughput.fake_upstream_steps()
    assert sum(isinstance(s, steps_module.Chunk) for s in steps) == throughput.DELTAS + 2
    assert isinstance(steps[-1], steps_module.Done)
    per_chunk = _body(steps_module, steps)
    assert per_chunk.count(b"data: ") == throughput.DELTAS + 3 and per_chunk.endswith(b"data: [DONE]\n\n")
    assert _body(steps_module, throughput.encoded_steps(steps)) == per_chunk
    assert _body(steps_module, throughput.encoded_steps(steps, burst=26)) == per_chunk


def test_encoded_steps_group_writes_and_pace_between_them(
    bench: tuple[ModuleType, ModuleType], steps_module: ModuleType
) -> None:
    throughput, _ = bench
    Raw, Sleep = steps_module.Raw, steps_module.Sleep
    steps = throughput.fake_upstream_steps()
    one = throughput.encoded_steps(steps)
    assert len(one) == len(steps) and all(isinstance(s, Raw) for s in one)
    burst = throughput.encoded_steps(steps, burst=26)
    assert len(burst) == -(-len(steps) // 26)
    assert b"".join(s.data for s in burst) == b"".join(s.data for s in one)
    paced = throughput.encoded_steps(steps, burst=26, pace_ms=5)
    assert [type(s) for s in paced] == [Raw] + [Sleep, Raw] * (len(burst) - 1)  # a pause between writes, none first
    assert all(s.seconds == pytest.approx(0.005) for s in paced if isinstance(s, Sleep))


def test_procstat_counts_cpu_and_read_calls_of_this_process(bench: tuple[ModuleType, ModuleType]) -> None:
    _, procstat = bench
    core = os.sched_getaffinity(0).pop()
    before = procstat.sample(os.getpid(), core)
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn CPU until the kernel's tick-granular counter must have moved
        pass
    read_fd, write_fd = os.pipe()
    try:
        for _ in range(50):
            os.write(write_fd, b"x")
            os.read(read_fd, 1)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    used = procstat.sample(os.getpid(), core).since(before)
    assert used.cpu_s >= 0.2
    assert used.read_calls >= 50 and used.write_calls >= 50
    # (this process is not pinned: the core sampled may or may not be the one it ran on)
    assert 0 <= used.core_idle_ticks <= used.core_total_ticks and used.core_total_ticks > 0
    idle = used.core_idle_pct()
    assert idle is not None and 0 <= idle <= 100


def test_procstat_counts_a_child_process_and_refuses_an_unknown_core(bench: tuple[ModuleType, ModuleType]) -> None:
    _, procstat = bench
    child = os.fork()
    if child == 0:  # the child burns CPU until killed
        while True:
            pass
    try:
        assert child in procstat.process_tree(os.getpid())
        deadline = time.monotonic() + 20  # on a busy machine the child may get little of a core: wait for its CPU
        while procstat.sample(child).cpu_s < 0.1 and time.monotonic() < deadline:
            time.sleep(0.05)
        child_cpu = procstat.sample(child).cpu_s
        assert child_cpu >= 0.1
        own = procstat.cpu_seconds(os.getpid())
        # the tree's CPU is this process's plus the child's (read later, so no less; a tick of rounding each)
        assert procstat.sample(os.getpid()).cpu_s >= own + child_cpu - 0.02
        assert procstat.sample(os.getpid()).core_total_ticks == 0  # no core asked: none sampled
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
    with pytest.raises(ValueError, match="cpu4096"):
        procstat.core_ticks(4096)


def test_encoded_steps_refuses_a_step_it_cannot_encode(
    bench: tuple[ModuleType, ModuleType], steps_module: ModuleType
) -> None:
    with pytest.raises(TypeError, match="not Sleep"):
        bench[0].encoded_steps([steps_module.Sleep(0.1)])


def test_level_counters_and_the_unsaturated_flag(bench: tuple[ModuleType, ModuleType]) -> None:
    throughput, procstat = bench
    used = procstat.Sample(cpu_s=2.0, read_calls=500, write_calls=2_000, core_idle_ticks=30, core_total_ticks=1_000)
    row = throughput.level_counters(used, events=200_000, requests=100, counts_calls=True)
    assert row == {"server_cpu_s": 2.0, "cpu_us_per_event": 10.0, "server_reads_per_request": 5.0,
                   "server_writes_per_request": 20.0, "server_core_idle_pct": 3.0}
    pure = throughput.level_counters(used, events=200_000, requests=100, counts_calls=False)
    assert pure["server_reads_per_request"] is None and pure["server_writes_per_request"] is None
    unpinned = procstat.Sample(2.0, 500, 2_000, 0, 0)
    assert throughput.level_counters(unpinned, 200_000, 100, True)["server_core_idle_pct"] is None

    def report(idle: float) -> dict[str, object]:
        common = {"concurrency": 100, "ttfb_p50_ms": 1.0, "ttfb_p99_ms": 2.0, "requests": 100, "errors": {}}
        rows = {"gateway": dict(row, **common, events_per_s=90_000),
                "gateway-http": dict(row, **common, events_per_s=60_000, server_core_idle_pct=idle)}
        return {"servers": {k: [v] for k, v in rows.items()}, "runs": {}}

    flagged = [line for line in throughput.ratios(report(3.0)) if "idled" in line]
    assert flagged and all(line.startswith(("gateway:", "gateway-http:")) for line in flagged)
    assert any(line.startswith("gateway-http: its core idled 3.0%") for line in flagged)
    assert not [line for line in throughput.ratios(report(1.0)) if line.startswith("gateway-http: its core idled")]
    table = throughput.table({"servers": report(3.0)["servers"], "memory": {}})
    assert "| 5.0 / 20.0 |" in table and "| 3.0 |" in table
