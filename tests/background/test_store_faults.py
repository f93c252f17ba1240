"""Store trouble and races through the app (in-thread gateways, SIMULATED scripted upstreams, FakeRouter): Redis
going away and coming back, retention expiry, cancel racing the end of a response, delete while a reader tails."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from plugins.redis_server import RedisServer
from respstream.server.upstream.scripted import ScriptedUpstream
from server.helpers import ServerThread, make_app

from .gateways import interrupted, stream_core, wait_status

TERMINALS = {"response.completed", "response.incomplete", "response.failed", "error"}


def _upstreams() -> dict[str, Any]:
    return {
        "fast": ScriptedUpstream(5, name="fast", models=["fast"]),
        "quick": ScriptedUpstream(12, name="quick", models=["quick"], delay_ms=2),
        "slow": ScriptedUpstream(300, name="slow", models=["slow"], delay_ms=10),
    }


@pytest.fixture(params=["default", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """`default`: memory store, background responses in SQLite under the (private) data dir; `redis`: db 1."""
    if request.param == "default":
        return "memory"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url.rsplit("/", 1)[0] + "/1"


@pytest.fixture
def gateway(store_url: str) -> Iterator[str]:
    app = make_app(upstreams=_upstreams(), store=store_url, lease_seconds=1.0, keepalive_seconds=0.5)
    with ServerThread(app) as srv:
        yield srv.url


def _terminals(raw: bytes) -> list[str]:
    core = stream_core(raw)
    assert core.violations == [], core.violations
    types = [json.loads(line[6:])["type"] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    return [t for t in types if t in TERMINALS]


def test_redis_outage_503_before_streaming_error_during_and_recovery() -> None:
    redis = RedisServer()
    redis.start()
    try:
        app = make_app(upstreams=_upstreams(), store=redis.url, lease_seconds=1.0, keepalive_seconds=0.5)
        with ServerThread(app) as srv, httpx.Client(timeout=30) as c:
            earlier = c.post(f"{srv.url}/v1/responses", json={"input": "x", "model": "fast", "background": True})
            wait_status(c, srv.url, earlier.json()["id"], {"completed"})
            slow = {"input": "x", "model": "slow", "background": True}
            rid = c.post(f"{srv.url}/v1/responses", json=slow).json()["id"]
            with c.stream("GET", f"{srv.url}/v1/responses/{rid}", params={"stream": "true"}) as live:
                seen, _, waited = interrupted(live, 5, redis.stop)
            refused = c.post(f"{srv.url}/v1/responses", json={"input": "x", "model": "fast"})
            polled = c.get(f"{srv.url}/v1/responses/{earlier.json()['id']}")
            redis.start()  # same port, empty (no persistence)
            again = c.post(f"{srv.url}/v1/responses", json={"input": "x", "model": "fast", "background": True,
                                                             "stream": True})
    finally:
        redis.stop()
    core = stream_core(seen)
    assert core.violations == [] and core.result.error is not None
    assert core.result.error["code"] == "store_unavailable" and waited < 10
    for r in (refused, polled):
        assert r.status_code == 503 and r.json()["error"]["code"] == "store_unavailable" and r.json()["detail"]
    assert refused.headers["retry-after"] == "1"
    assert again.status_code == 200
    recovered = stream_core(again.content)
    assert recovered.violations == [] and recovered.result.status == "completed"


def test_retention_expiry(store_url: str) -> None:
    app = make_app(upstreams=_upstreams(), store=store_url, lease_seconds=1.0, retention_seconds=1.0)
    with ServerThread(app) as srv, httpx.Client(timeout=30) as c:
        bg = c.post(f"{srv.url}/v1/responses", json={"input": "x", "model": "fast", "background": True}).json()["id"]
        wait_status(c, srv.url, bg, {"completed"})
        fg = c.post(f"{srv.url}/v1/responses", json={"input": "x", "model": "fast", "stream": False}).json()["id"]
        assert c.get(f"{srv.url}/v1/responses/{fg}").status_code == 200
        deadline = time.monotonic() + 8
        codes: tuple[int, int] = (200, 200)
        while time.monotonic() < deadline and codes != (404, 404):
            time.sleep(0.2)
            codes = (c.get(f"{srv.url}/v1/responses/{bg}").status_code,
                     c.get(f"{srv.url}/v1/responses/{fg}").status_code)
    assert codes == (404, 404)


def test_cancel_racing_the_end_leaves_exactly_one_terminal(gateway: str) -> None:
    outcomes: set[str] = set()
    with httpx.Client(timeout=30) as c:
        for i in range(12):
            rid = c.post(f"{gateway}/v1/responses", json={"input": "x", "model": "quick",
                                                          "background": True}).json()["id"]
            time.sleep(i * 0.004)
            answered = c.post(f"{gateway}/v1/responses/{rid}/cancel").json()["status"]
            raw = c.get(f"{gateway}/v1/responses/{rid}", params={"stream": "true"}).content
            record = c.get(f"{gateway}/v1/responses/{rid}").json()["status"]
            assert len(_terminals(raw)) == 1, raw[-400:]
            status = stream_core(raw).result.status
            assert answered == record == status, (i, answered, record, status)
            assert status in ("cancelled", "completed")
            outcomes.add(status)
    assert "cancelled" in outcomes


def test_delete_while_a_reader_tails(gateway: str) -> None:
    with httpx.Client(timeout=30) as c:
        rid = c.post(f"{gateway}/v1/responses", json={"input": "x", "model": "slow", "background": True}).json()["id"]
        with c.stream("GET", f"{gateway}/v1/responses/{rid}", params={"stream": "true"}) as live:
            seen, deleted, closed_after = interrupted(live, 3, lambda: c.delete(f"{gateway}/v1/responses/{rid}"))
        gone = c.get(f"{gateway}/v1/responses/{rid}")
    assert deleted.json()["deleted"] is True and gone.status_code == 404
    assert _terminals(seen) == ["error"] and closed_after < 5
    assert stream_core(seen).result.status == "cancelled"
