"""Deferred background work on two `respstream serve` processes sharing one real redis-server, one of them killed
(`kill -9`) while it runs the work: queued on one instance, taken by the other (the first is busy with an interactive
stream, which goes first), taken over when the instance running it dies, visible in /metrics as waiting again, and
finished with one clean log. The upstream is the SIMULATED in-process `scripted:` backend."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from background.gateways import GatewayProcess, stream_core, wait_status
from plugins.redis_server import RedisServer

pytestmark = pytest.mark.redis

SETTINGS = {"deferred_poll_seconds": 0.2, "lease_seconds": 1.0}
UPSTREAM = "scripted:200?delay_ms=30"  # 6 s a response


def _metric(url: str, line: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if line in httpx.get(f"{url}/metrics", timeout=5).text:
            return True
        time.sleep(0.1)
    return False


def test_queued_anywhere_taken_by_the_idle_instance_and_taken_over_when_it_dies(
        redis_server: RedisServer, tmp_path: Path) -> None:
    a = GatewayProcess(tmp_path, store=redis_server.url, upstream=UPSTREAM, **SETTINGS).start()
    b = GatewayProcess(tmp_path, store=redis_server.url, upstream=UPSTREAM, **SETTINGS).start()
    try:
        with httpx.Client(timeout=30) as client:
            # B is busy with an interactive stream (interactive first): deferred work is left to A.
            talker = threading.Thread(target=lambda: httpx.post(
                f"{b.url}/v1/responses", json={"input": "talk to me", "stream": True}, timeout=60))
            talker.start()
            time.sleep(0.5)
            created = client.post(f"{b.url}/v1/responses", json={
                "input": "a long batch job", "background": True, "stream": False,
                "background_options": {"completion_window": "2h"}})
            assert created.status_code == 200, created.text
            rid = created.json()["id"]
            assert created.json()["status"] == "queued"
            wait_status(client, b.url, rid, {"in_progress"}, timeout=10)  # A took it (B is busy)
            time.sleep(0.5)  # A is generating
            a.kill()
            # Once A's lease ran out, the work waits in the queue again (B still talks, so it is not taken yet).
            assert _metric(b.url, 'respstream_deferred_queue_depth{state="waiting"} 1.0', timeout=4.0)
            talker.join()
            final = wait_status(client, b.url, rid, {"completed"}, timeout=30)
            log = client.get(f"{b.url}/v1/responses/{rid}", params={"stream": "true"}).content
            # (the gauges are published by the scheduler's step, every deferred_poll_seconds: polled, not read once)
            drained = all(_metric(b.url, line, timeout=5.0) for line in (
                'respstream_deferred_runs_total{outcome="took_over"} 1.0',
                'respstream_deferred_queue_depth{state="waiting"} 0.0',
                'respstream_deferred_queue_depth{state="taken"} 0.0'))
    finally:
        a.stop()
        b.stop()
    core = stream_core(log)
    assert core.violations == [] and core.result.status == "completed"
    assert len(core.result.output_text.split()) == 200 and core.result.output_text == final["output_text"]
    assert drained  # took over once; nothing waiting or taken once it completed


def test_an_instance_shutting_down_leaves_its_running_work_to_the_other(
        redis_server: RedisServer, tmp_path: Path) -> None:
    a = GatewayProcess(tmp_path, store=redis_server.url, upstream=UPSTREAM, **SETTINGS).start()
    try:
        with httpx.Client(timeout=30) as client:
            rid = client.post(f"{a.url}/v1/responses", json={
                "input": "a batch job", "background": True,
                "background_options": {"completion_window": "8h"}}).json()["id"]
            wait_status(client, a.url, rid, {"in_progress"}, timeout=10)
            a.stop()  # SIGTERM: background work gets shutdown_grace_seconds (0.5 s), then ends
            with GatewayProcess(tmp_path, store=redis_server.url, upstream=UPSTREAM, **SETTINGS) as b:
                final = wait_status(client, b.url, rid, {"completed"}, timeout=40)
                log = client.get(f"{b.url}/v1/responses/{rid}", params={"stream": "true"}).content
                metrics = client.get(f"{b.url}/metrics").text
    finally:
        a.stop()
    core = stream_core(log)
    assert core.violations == [] and core.result.status == "completed"
    assert len(final["output_text"].split()) == 200
    assert 'respstream_deferred_runs_total{outcome="took_over"} 1.0' in metrics
