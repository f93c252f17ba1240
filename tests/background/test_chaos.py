"""Chaos, bounded: 3 gateway instances (``respstream serve`` subprocesses) on one real Redis Cluster (3 primaries +
3 replicas), 300 background responses in flight (the SIMULATED scripted upstream with small delays), one reader per
response on another instance. Then ``kill -9`` of one instance, then ``kill -9`` of one Redis primary (its replica
takes over). Checked:

- every reader ends with a terminal event within stream time + lease + failover time (readers whose instance was
  killed resume on a live one with ``starting_after``, as a client would);
- every log is gap-free and duplicate-free (sequence numbers 0..N as the reader collected them across resumes);
- the responses of the killed instance end with ``worker_lost``; every response of a live instance completes, also
  those whose keys sat on the killed primary;
- a resume from every live instance returns exactly the log the reader collected.

Each instance also runs with ``max_background_responses`` = the stream count (the default 64 would refuse most).
What made this flaky before (issue #16), fixed in server/store: lease renewals that failed slowly during the failover
were retried only a whole interval later, so a healthy writer's lease ran out (lease.py now retries soon); our
``asyncio.timeout`` bounds cancelled redis-py cluster calls in the middle of a re-discovery, whose error path closes
every connection to every node, and redis-py's ``reinitialize_steps`` did the same on every 5th MOVED: healthy
primaries' commands failed with the dead one's and the client kept re-discovering for longer than a lease.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from plugins.redis_cluster import RedisCluster
from respstream.server.store.redis_keys import RedisKeys

from .gateways import GatewayProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(240)]

STREAMS = 300
DELTAS = 40
DELAY_MS = 150  # ~6 s per response
LEASE = 10.0  # longer than a failover (cluster-node-timeout 1 s; detection + promotion + the clients' re-discovery
# took 3-5 s on a loaded 2-core machine): a live instance's lease must outlast it
BOUND = DELTAS * DELAY_MS / 1000 + LEASE + 20  # stream + lease + failover, with room for a loaded 2-core machine
TERMINALS = {"response.completed", "response.failed", "response.incomplete"}
# An `error` the reader's own sender ends with (not in the log), or one the writer logged (then its terminal follows)
READER_TERMINALS = {"store_unavailable"}


def _events(block: str) -> dict[str, Any] | None:
    for line in block.split("\n"):
        if line.startswith("data:"):
            data = line[5:].strip()
            return None if data == "[DONE]" else json.loads(data)
    return None


async def _read_stream(client: httpx.AsyncClient, base: str, rid: str, after: int, got: list[dict[str, Any]]) -> bool:
    """Append the events after ``after`` to ``got``; True once a terminal arrived. Raises httpx errors on a drop."""
    params = {"stream": "true", "starting_after": str(after)}
    async with client.stream("GET", f"{base}/v1/responses/{rid}", params=params) as response:
        if response.status_code == 204:
            return True
        assert response.status_code == 200, (response.status_code, await response.aread())
        buffer = ""
        held: dict[str, Any] | None = None  # a `store_unavailable` error: the log's, or the sender's own?
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                event = _events(block)
                if event is None:
                    continue
                if held is not None:  # more came after it: it was a log entry (the writer's own failure)
                    got.append(held)
                    held = None
                if event.get("type") == "error" and (event.get("error") or {}).get("code") in READER_TERMINALS:
                    held = event
                    continue
                got.append(event)
                if event.get("type") in TERMINALS:
                    return True
        if held is not None:
            # The stream ended on it: the sender gave up on a failing store (a failover longer than its retry
            # window). Not a log entry; it says "come back later". A client resumes from its last event.
            raise httpx.ReadError(f"reader terminal: {held['error']['code']}")
    return False


async def _reader(i: int, rid: str, gateways: list[GatewayProcess], dead: set[int],
                  logs: dict[str, list[dict[str, Any]]], ended: dict[str, float], client: httpx.AsyncClient) -> None:
    got = logs[rid] = []
    target = (i + 1) % len(gateways)
    if True:
        while True:
            if target in dead:
                target = next(k for k in range(len(gateways)) if k not in dead and k != target)
            after = got[-1]["sequence_number"] if got else -1
            try:
                if await _read_stream(client, gateways[target].url, rid, after, got):
                    ended[rid] = time.monotonic()
                    return
            except (httpx.HTTPError, AssertionError):
                await asyncio.sleep(0.2)  # the instance is gone (or the store failing over): resume elsewhere
                target = (target + 1) % len(gateways)


async def _chaos(gateways: list[GatewayProcess], cluster: RedisCluster) -> dict[str, Any]:
    made: dict[str, int] = {}
    gate = asyncio.Semaphore(30)

    async def create(i: int, client: httpx.AsyncClient) -> None:
        async with gate:
            owner = i % len(gateways)
            for _attempt in range(10):  # a 503 (a store call timing out on the loaded machine) is retried, as a
                got = await client.post(f"{gateways[owner].url}/v1/responses",  # client does after Retry-After
                                        json={"input": f"chaos {i}", "background": True, "stream": False})
                if got.status_code != 503:
                    break
                await asyncio.sleep(0.5)
            assert got.status_code == 200, got.text
            made[got.json()["id"]] = owner

    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=30) as client:
        await asyncio.gather(*(create(i, client) for i in range(STREAMS)))
    print(f"chaos: created {STREAMS} in {time.monotonic() - t0:.1f} s")
    dead: set[int] = set()
    logs: dict[str, list[dict[str, Any]]] = {}
    ended: dict[str, float] = {}
    started = time.monotonic()
    # One client for all readers (building one costs ~40 ms of CPU: 300 of them would stall this loop for seconds).
    client = httpx.AsyncClient(timeout=httpx.Timeout(30, read=LEASE * 3),
                               limits=httpx.Limits(max_connections=STREAMS + 50, max_keepalive_connections=0))
    readers = [asyncio.create_task(_reader(i, rid, gateways, dead, logs, ended, client))
               for i, rid in enumerate(made)]
    await asyncio.sleep(2.0)
    print(f"chaos: killing instance 0 at {time.monotonic() - started:.1f} s")
    dead.add(0)
    await asyncio.to_thread(gateways[0].kill)
    await asyncio.sleep(1.0)
    # The primary holding a live instance's response: its appends must ride over the failover.
    victim_rid = next(rid for rid, owner in made.items() if owner == 1)
    primary = cluster.primary_for(RedisKeys("respstream:").response(victim_rid).rec)
    await asyncio.to_thread(cluster.kill, primary)
    killed_at = time.monotonic()
    done, pending = await asyncio.wait(readers, timeout=BOUND)
    for task in pending:
        task.cancel()
    stuck: dict[str, Any] = {rid: [made[rid], len(events), events[-1]["type"] if events else None]
                             for rid, events in logs.items() if rid not in ended}
    for rid in stuck:  # what the live instances say about it (for the failure message)
        for k, gateway in enumerate(gateways):
            if k not in dead:
                try:
                    got = await client.get(f"{gateway.url}/v1/responses/{rid}", timeout=5)
                    stuck[rid].append((k, got.status_code, got.json().get("status")))
                except (httpx.HTTPError, ValueError) as exc:
                    stuck[rid].append((k, repr(exc)))
    for task in done:
        task.result()  # a reader that crashed fails the test with its own error
    await client.aclose()
    return {"made": made, "logs": logs, "ended": ended, "started": started, "killed_at": killed_at,
            "pending": len(pending), "stuck": stuck, "victim": victim_rid, "primary": primary}


def test_kill_an_instance_then_a_redis_primary_with_300_streams_in_flight(tmp_path: Path) -> None:
    cluster = RedisCluster()
    cluster.start()
    gateways = [GatewayProcess(tmp_path, store=cluster.url, upstream=f"scripted:{DELTAS}?delay_ms={DELAY_MS}",
                               dialect="openai", lease_seconds=LEASE,
                               max_background_responses=STREAMS) for _ in range(3)]
    try:
        for gateway in gateways:
            gateway.start()
        result = asyncio.run(_chaos(gateways, cluster))
        made, logs, ended = result["made"], result["logs"], result["ended"]
        assert result["pending"] == 0, (f"{result['pending']} readers had no terminal within {BOUND:g} s: "
                                        f"{result['stuck']}")
        assert len(ended) == STREAMS
        lost = 0
        for rid, events in logs.items():
            seqs = [e["sequence_number"] for e in events]
            assert seqs == list(range(len(seqs))), f"{rid} (instance {made[rid]}): gap or duplicate in {seqs}; " \
                f"last events {[json.dumps(e)[:300] for e in events[-3:]]}"
            last = events[-1]
            if made[rid] == 0 and last["type"] != "response.completed":
                # its instance was killed mid-stream: ended by a reader on another instance (one that finished
                # before the kill, while the others were still being created, completed normally)
                assert last["type"] in ("response.failed", "error"), (rid, last["type"])
                assert "worker_lost" in json.dumps(last), (rid, last)
                lost += 1
            else:
                assert last["type"] == "response.completed", (rid, made[rid], json.dumps(last)[-600:])
        assert lost >= STREAMS // 3 // 2, f"only {lost} of the killed instance's responses were in flight"
        assert logs[result["victim"]][-1]["type"] == "response.completed"
        print(f"chaos: {STREAMS} streams, {lost} ended worker_lost, last terminal "
              f"{max(ended.values()) - result['killed_at']:.1f} s after the primary was killed")

        async def resume_all() -> None:  # every log, from every live instance, equals what the reader collected
            gate = asyncio.Semaphore(40)

            async def one(rid: str, base: str, client: httpx.AsyncClient) -> None:
                async with gate:
                    again: list[dict[str, Any]] = []
                    assert await _read_stream(client, base, rid, -1, again)
                    assert again == logs[rid], rid

            async with httpx.AsyncClient(timeout=30) as client:
                await asyncio.gather(*(one(rid, g.url, client) for rid in logs for g in gateways[1:]))

        asyncio.run(resume_all())
    finally:
        for gateway in gateways:
            gateway.stop()
        cluster.stop()
