"""Shared limits: two real gateway instances (``respstream serve`` subprocesses) on one real Redis share one rate
limit per client and one open-stream budget; a killed instance's streams stop counting after a lease. Upstream: the
SIMULATED scripted backend."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from plugins.redis_server import RedisServer
from respstream.server.config import ConfigError, load_config

from .gateways import GatewayProcess

pytestmark = [pytest.mark.redis, pytest.mark.timeout(90)]


@pytest.fixture
def redis() -> RedisServer:
    server = RedisServer()  # private: the buckets are keyed by client address, which every test shares
    server.start()
    yield server  # type: ignore[misc]
    server.stop()


def test_the_rate_limit_is_one_bucket_across_instances(tmp_path: Path, redis: RedisServer) -> None:
    settings = {"rate_limit_per_minute": 6, "rate_limit_burst": 6}
    with GatewayProcess(tmp_path, store=redis.url, **settings) as a, GatewayProcess(tmp_path, store=redis.url,
                                                                                   **settings) as b:
        statuses = []
        for i in range(8):  # per instance alone, 6 + 6 would pass
            gateway = (a, b)[i % 2]
            got = httpx.get(f"{gateway.url}/v1/responses/resp_missing", timeout=10)
            statuses.append(got.status_code)
            if got.status_code == 429:
                assert int(got.headers["retry-after"]) >= 1
                assert got.json()["error"]["code"] == "rate_limited"
        assert statuses[:6] == [404] * 6 and statuses[6:] == [429, 429]


def _open_stream(url: str, opened: list[int], stop: threading.Event) -> None:
    try:
        with httpx.Client(timeout=30) as client, client.stream("POST", f"{url}/v1/responses",
                                                               json={"input": "long", "stream": True}) as response:
            opened.append(response.status_code)
            for _ in response.iter_bytes():
                if stop.is_set():
                    return
    except httpx.HTTPError:
        pass  # the instance serving it was killed: expected for two of them


def test_the_stream_budget_is_shared_and_a_killed_instance_stops_counting(tmp_path: Path, redis: RedisServer) -> None:
    settings = {"shared_max_concurrent_streams": 3}
    slow = "scripted:400?delay_ms=25"  # ~10 s per stream
    a = GatewayProcess(tmp_path, store=redis.url, upstream=slow, **settings).start()
    b = GatewayProcess(tmp_path, store=redis.url, upstream=slow, **settings).start()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    opened: list[int] = []
    try:
        for url in (a.url, a.url, b.url):
            thread = threading.Thread(target=_open_stream, args=(url, opened, stop), daemon=True)
            thread.start()
            threads.append(thread)
        deadline = time.monotonic() + 20
        while len(opened) < 3:
            assert time.monotonic() < deadline, opened
            time.sleep(0.05)
        assert opened == [200, 200, 200]
        refused = httpx.post(f"{b.url}/v1/responses", json={"input": "one more", "stream": True}, timeout=10)
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "too_many_streams"
        assert "across the gateway's instances" in refused.json()["error"]["message"]
        a.kill()  # its two streams die with it; its budget share lapses after one lease (1 s) without a report
        deadline = time.monotonic() + 10
        while True:
            with httpx.Client(timeout=10) as client, client.stream("POST", f"{b.url}/v1/responses",
                                                                   json={"input": "now", "stream": True}) as response:
                if response.status_code == 200:
                    break
                assert response.status_code == 503
            assert time.monotonic() < deadline, "the killed instance's streams still count"
            time.sleep(0.2)
    finally:
        stop.set()
        a.stop()
        b.stop()
        for thread in threads:
            thread.join(timeout=10)


def test_a_shared_stream_budget_needs_a_redis_store() -> None:
    with pytest.raises(ConfigError, match="shared_max_concurrent_streams needs a Redis store"):
        load_config(None, {"shared_max_concurrent_streams": 5, "store": "memory"})
    assert load_config(None, {"shared_max_concurrent_streams": 5, "store": "redis://127.0.0.1:1/0"}).shared_limits
