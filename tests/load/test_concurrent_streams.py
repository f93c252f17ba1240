"""Small, bounded load: 200 concurrent streams against ``respstream serve`` with the SIMULATED scripted backend.

Uses the benchmark's raw-socket load generator (benchmarks/loadgen.py): every stream must be a 200 with the full
chunked body and exactly the expected number of events; memory per open stream is sampled from /proc while all 200
are open (``delay_ms`` keeps them open ~2 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx
import pytest

from faults.helpers import check

pytestmark = pytest.mark.slow
STREAMS = 200
BODY = b'{"input": "hello", "stream": true}'


def _events_per_response(url: str) -> int:
    raw = httpx.post(url, content=BODY, headers={"content-type": "application/json"}, timeout=30).content
    core = check(raw)
    assert core.violations == [] and core.result.status == "completed"
    return core.result.events


def test_200_concurrent_streams_zero_errors_and_bounded_memory(
    serve: Callable[[str], Any], loadgen: ModuleType
) -> None:
    gw = serve("scripted:100?delay_ms=20")
    expected = _events_per_response(gw.url)
    idle = gw.rss_kib()
    samples: list[int] = []

    async def main() -> Any:
        async def sample() -> None:
            while True:
                samples.append(gw.rss_kib())
                await asyncio.sleep(0.05)

        task = asyncio.create_task(sample())
        opened: list[int] = []
        try:
            return await loadgen.run_load(gw.url, BODY, concurrency=STREAMS, total=STREAMS, time_limit=30,
                                          timeout=60, expected_events=expected,
                                          on_all_open=lambda: opened.append(gw.rss_kib())), opened
        finally:
            task.cancel()

    result, opened = asyncio.run(main())
    assert result.errors == {}, result.summary()
    assert result.ok == STREAMS and result.events == STREAMS * expected
    assert opened, "the 200 streams were never open at the same time"
    per_stream = (max(samples + opened) - idle) / STREAMS
    assert per_stream < 100, f"{per_stream:.1f} KiB per open stream (idle {idle} KiB)"


def test_burst_without_delay_every_stream_valid(serve: Callable[[str], Any], loadgen: ModuleType) -> None:
    gw = serve("scripted:200")
    expected = _events_per_response(gw.url)
    result = asyncio.run(loadgen.run_load(gw.url, BODY, concurrency=STREAMS, total=STREAMS, time_limit=60,
                                          timeout=60, expected_events=expected))
    assert result.errors == {}, result.summary()
    assert result.ok == STREAMS

    async def sample_streams() -> list[bytes]:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=20)) as client:
            responses = await asyncio.gather(*(client.post(gw.url, content=BODY,
                                                           headers={"content-type": "application/json"})
                                               for _ in range(20)))
        return [r.content for r in responses]

    for raw in asyncio.run(sample_streams()):  # and the bytes themselves: checked by the protocol core
        core = check(raw)
        assert core.violations == []
        assert core.result.status == "completed" and core.result.events == expected


def test_stream_gate_refuses_past_max_concurrent_streams(loadgen: ModuleType) -> None:
    """In-process gateway with max_concurrent_streams=5: extra streams get 503 too_many_streams, not a hang."""
    from faults.helpers import GatewayThread, gateway_app
    from respstream.server.upstream.scripted import ScriptedUpstream

    app = gateway_app([ScriptedUpstream(40, name="scripted", models=["scripted"], delay_ms=20)],
                      max_concurrent_streams=5)
    with GatewayThread(app) as gw:
        result = asyncio.run(loadgen.run_load(f"{gw.url}/v1/responses", BODY, concurrency=12, total=12,
                                              time_limit=20, timeout=20))
        refused = httpx.post(f"{gw.url}/v1/responses", content=BODY, headers={"content-type": "application/json"},
                             timeout=10)
    assert result.ok >= 5
    assert set(result.errors) <= {"status:503"}
    assert result.ok + result.errors.get("status:503", 0) == 12
    assert result.errors.get("status:503", 0) >= 1
    assert refused.status_code == 200  # the gate reopens once streams end
