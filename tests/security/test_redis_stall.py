"""Item 7 of issue 13: a Redis stall of a few seconds no longer ends live background responses.

At c1c983b the append retried after a 2 s socket timeout was not idempotent: its first attempt had landed, so the
retry got ``SequenceConflict`` and the response ended ``worker_lost`` (4 s stall) or ``internal_error`` (8 s). Here a
private REAL ``redis-server`` is paused with SIGSTOP for 4 s (then SIGCONT) while a REAL gateway subprocess streams a
background response from the SIMULATED scripted upstream; it must complete with every event once, in order."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from plugins.redis_server import RedisServer

from .gateway import Gateway


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        assert server.process is not None
        server.process.send_signal(signal.SIGCONT)  # never leave it stopped
        server.stop()


def test_background_response_survives_a_4s_redis_stall(tmp_path: Path, private_redis: RedisServer) -> None:
    assert private_redis.process is not None
    with Gateway(tmp_path, "--store", private_redis.url, upstreams=["scripted:120?delay_ms=50"],
                 dialect="openai", lease_seconds=10.0) as gw:
        created = httpx.post(f"{gw.url}/v1/responses", json={"input": "hi", "background": True, "stream": False},
                             timeout=10).json()
        rid = created["id"]
        time.sleep(1.0)  # generating, with events landing in Redis
        private_redis.process.send_signal(signal.SIGSTOP)
        try:
            time.sleep(4.0)
        finally:
            private_redis.process.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 30
        final: dict[str, object] = {}
        while time.monotonic() < deadline:
            final = httpx.get(f"{gw.url}/v1/responses/{rid}", timeout=10).json()
            if final.get("status") not in ("queued", "in_progress"):
                break
            time.sleep(0.2)
        stream = httpx.get(f"{gw.url}/v1/responses/{rid}", params={"stream": "true"}, timeout=20).text
    assert final.get("status") == "completed", json.dumps(final)[:500]
    numbers = [json.loads(line[6:])["sequence_number"] for line in stream.splitlines() if line.startswith("data: ")]
    assert numbers == list(range(len(numbers))) and numbers, numbers[:20]
