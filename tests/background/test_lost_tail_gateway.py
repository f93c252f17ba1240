"""Issue 16, through the app: a Redis failover that loses acknowledged events mid-stream leaves no hole.

A real primary and a real replica (two private ``redis-server`` processes), a gateway (in-thread, SIMULATED scripted
upstream, FakeRouter) on the primary, a background response streaming to a live reader. The replica is cut off
(``REPLICAOF NO ONE``) while the response keeps writing to the primary; then the primary is given the response's
keys as the replica holds them (``DUMP`` there, ``RESTORE ... REPLACE`` in one ``MULTI`` here, so no client ever
sees them missing): what a promoted replica that missed those writes would serve. The events written in between
are gone from Redis although the gateway had them acknowledged. The gateway's next append is refused as a gap, it
resends them, and the response completes; the live reader's events, the full replay and the record agree,
gap-free and duplicate-free.
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from plugins.redis_server import RedisServer
from respstream.server.upstream.scripted import ScriptedUpstream
from server.helpers import ServerThread, make_app

from .gateways import wait_status

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]


def _events(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]


def _wait_role(client: redis.Redis, role: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        info = client.info("replication")
        if info.get("role") == role and (role == "master" or info.get("master_link_status") == "up"):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"redis did not become {role} in time: {info}")
        time.sleep(0.05)


class Run:
    """What one response through a mid-stream failover left: the live reader's events, the replay, the record."""

    def __init__(self, live: list[dict[str, Any]], replay: list[dict[str, Any]], record: dict[str, Any]) -> None:
        self.live, self.replay, self.record = live, replay, record


def _through_a_lossy_failover(tmp_path: Path, **config: Any) -> Run:
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary, replica = RedisServer(data_dir=str(tmp_path / "p")), RedisServer(data_dir=str(tmp_path / "r"))
    primary.start()
    replica.start()
    p = redis.Redis.from_url(primary.url)
    r = redis.Redis.from_url(replica.url)
    try:
        for node in (p, r):
            node.config_set("repl-diskless-sync-delay", 0)  # the first full sync starts at once
        r.replicaof("127.0.0.1", primary.port)
        _wait_role(r, "slave")
        p.set("replicated", 1)
        deadline = time.monotonic() + 10
        while r.get("replicated") is None:  # the replication stream flows
            assert time.monotonic() < deadline, r.info("replication")
            time.sleep(0.02)
        slow = ScriptedUpstream(300, name="slow", models=["slow"], delay_ms=10)
        app = make_app(upstreams={"slow": slow}, store=primary.url, lease_seconds=10.0, keepalive_seconds=0.5,
                       **config)
        with ServerThread(app) as srv, httpx.Client(timeout=60) as c:
            rid = c.post(f"{srv.url}/v1/responses",
                         json={"input": "x", "model": "slow", "background": True}).json()["id"]
            seen = b""
            with c.stream("GET", f"{srv.url}/v1/responses/{rid}", params={"stream": "true"}) as live:
                chunks = live.iter_raw()
                while seen.count(b"output_text.delta") < 20:
                    seen += next(chunks)
                r.replicaof("NO", "ONE")  # the replica keeps what it has and misses what follows
                _wait_role(r, "master")
                time.sleep(0.4)  # ~40 more events, acknowledged by the primary alone
                keys = r.keys(f"*{rid}*")
                assert len(keys) >= 2, r.info("replication")  # the record and the log (and the lease)
                with p.pipeline(transaction=True) as tx:
                    for key in keys:
                        tx.restore(key, max(r.pttl(key), 0), r.dump(key), replace=True)
                    tx.execute()
                for chunk in chunks:
                    seen += chunk
            record = wait_status(c, srv.url, rid, {"completed", "failed", "incomplete"})
            replay = _events(c.get(f"{srv.url}/v1/responses/{rid}", params={"stream": "true"}).content)
        return Run(_events(seen), replay, record)
    finally:
        p.close()
        r.close()
        primary.stop()
        replica.stop()


def _lost(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    lost = re.findall(r"lost sequence numbers (\d+)\.\.(\d+)", caplog.text)
    assert lost, "the failover lost nothing: the test did not test the repair"
    first, last = int(lost[0][0]), int(lost[0][1])
    assert last - first >= 10  # most of the ~0.4 s of events in between
    return first, last


def test_events_lost_in_a_failover_are_resent_and_every_reader_agrees(caplog: pytest.LogCaptureFixture,
                                                                      tmp_path: Path) -> None:
    caplog.set_level(logging.WARNING)
    run = _through_a_lossy_failover(tmp_path)
    _lost(caplog)
    replay = run.replay
    assert run.record["status"] == "completed"
    assert [e["sequence_number"] for e in replay] == list(range(len(replay)))  # no gap, no duplicate
    assert replay[-1]["type"] == "response.completed"
    assert run.live == replay
    deltas = "".join(e["delta"] for e in replay if e["type"] == "response.output_text.delta")
    assert sum(e["type"] == "response.output_text.delta" for e in replay) == 300
    assert deltas == replay[-1]["response"]["output"][0]["content"][0]["text"]


def test_a_loss_past_the_resend_buffer_fails_the_response_without_a_hole(caplog: pytest.LogCaptureFixture,
                                                                         tmp_path: Path) -> None:
    """Only 2 events kept for resending, ~40 lost: the response ends with `error` `store_unavailable` saying the
    store lost events, appended right after what the log still holds (which is what every later reader gets)."""
    caplog.set_level(logging.WARNING)
    run = _through_a_lossy_failover(tmp_path, redis_resend_entries=2)
    assert "no longer holds them all to resend" in caplog.text
    replay = run.replay
    assert [e["sequence_number"] for e in replay] == list(range(len(replay)))  # no gap, no duplicate
    assert replay[-1]["type"] == "error" and replay[-1]["code"] == "store_unavailable", replay[-1]
    assert "lost events" in replay[-1]["message"] and "redis_resend_entries" in replay[-1]["message"]
    assert run.record["status"] == "failed"
    assert replay[:-1] == run.live[: len(replay) - 1]  # what survived is what the live reader saw first
    # The live reader had seen events past the new end (on the old primary): its stream ends where it was, without
    # a terminal (the log's terminal sits below its cursor), instead of hanging (docs/operations.md says so).
    assert run.live[-1]["sequence_number"] > replay[-1]["sequence_number"]
    assert run.live[-1]["type"] == "response.output_text.delta"
