"""Redis only: a generating process killed with SIGKILL ends no reader; Redis down -> StoreUnavailable, then back."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
import pytest
from store_helpers import collect, entries, new_record

from plugins.redis_server import RedisServer
from respstream.server.store.base import StoreUnavailable
from respstream.server.store.redis import RedisStore

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]

LEASE = 1.0

# The child: creates a response, takes its lease, appends one event every 10 ms forever, printing progress.
CHILD = textwrap.dedent("""
    import asyncio, sys, time
    import orjson
    from respstream.server.store.base import LogEntry, ResponseRecord
    from respstream.server.store.redis import RedisStore

    async def main(url, prefix, response_id):
        store = RedisStore(url, instance_id="child", lease_seconds=%(lease)s, prefix=prefix)
        await store.create(ResponseRecord(id=response_id, status="in_progress", created_at=time.time(),
                                          instance_id="child"))
        async with store.hold_lease(response_id):
            seq = 0
            while True:
                data = orjson.dumps({"type": "response.output_text.delta", "sequence_number": seq, "delta": "x"})
                await store.append(response_id, [LogEntry(seq, "response.output_text.delta", data)])
                print(seq, flush=True)
                seq += 1
                await asyncio.sleep(0.01)

    asyncio.run(main(*sys.argv[1:]))
""") % {"lease": LEASE}


async def test_kill_9_of_the_generating_process_ends_every_reader_with_worker_lost(
    redis_server: RedisServer,
) -> None:
    prefix, response_id = f"k{uuid.uuid4().hex[:8]}:", uuid.uuid4().hex
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_server.url, prefix, response_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    reader = RedisStore(redis_server.url, instance_id="reader", lease_seconds=LEASE, prefix=prefix)
    try:
        assert child.stdout is not None
        for _ in range(20):  # wait until the child has appended 20 events
            line = await asyncio.to_thread(child.stdout.readline)
            assert line, f"child died early: {child.stderr.read().decode() if child.stderr else ''}"
        tails = [asyncio.create_task(collect(reader.tail(response_id, after=n))) for n in (-1, 5, 10)]
        await asyncio.sleep(0.05)  # the readers are now level with the writer, waiting
        os.kill(child.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        logs = await asyncio.wait_for(asyncio.gather(*tails), LEASE + 3.0)
        waited = time.monotonic() - killed_at
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    full = logs[0]
    last = full[-1]
    assert [e.sequence_number for e in full] == list(range(len(full)))
    assert last.terminal and sum(e.terminal for e in full) == 1
    assert orjson.loads(last.data)["code"] == "worker_lost"
    assert logs[1] == full[6:] and logs[2] == full[11:]
    assert waited < LEASE + 2.0, f"readers waited {waited:.2f} s for worker_lost (lease {LEASE} s)"
    assert await reader.read(response_id) == full
    await reader.aclose()


@asynccontextmanager
async def _private_redis() -> AsyncIterator[tuple[RedisServer, RedisStore]]:
    """A redis-server of the test's own (which it may stop and start) and a RedisStore on it."""
    server = RedisServer()
    server.start()
    store = RedisStore(server.url, instance_id="a", lease_seconds=LEASE)
    try:
        yield server, store
    finally:
        await store.aclose()
        server.stop()


async def test_redis_down_raises_store_unavailable_fast_then_recovers() -> None:
    async with _private_redis() as (server, store):
        record = new_record()
        await store.create(record)
        await store.append(record.id, entries(0, 3))
        server.stop()
        for call in (store.get(record.id), store.append(record.id, entries(3, 4)), store.read(record.id),
                     collect(store.tail(record.id)), store.create(new_record())):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await call
            assert time.monotonic() - started < 3.0
        server.start()  # same port, empty (no persistence): the store reconnects on its next call
        again = new_record()
        await store.create(again)
        await store.append(again.id, entries(0, 2, last_terminal=True))
        assert [e.sequence_number for e in await collect(store.tail(again.id))] == [0, 1]


async def test_stopping_redis_under_a_waiting_reader_raises_store_unavailable() -> None:
    async with _private_redis() as (server, store):
        record = new_record()
        await store.create(record)
        await store.append(record.id, entries(0, 1))
        reader = asyncio.create_task(collect(store.tail(record.id)))
        await asyncio.sleep(0.05)
        server.stop()
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(reader, 5)


async def test_every_key_carries_the_retention_ttl(redis_server: RedisServer) -> None:
    import redis.asyncio as aioredis

    prefix = f"ttl{uuid.uuid4().hex[:6]}:"
    store = RedisStore(redis_server.url, instance_id="a", retention_seconds=120, prefix=prefix)
    raw = aioredis.from_url(redis_server.url)
    try:
        record = new_record(instance_id="a")
        await store.create(record)
        await store.append(record.id, entries(0, 2))
        await store.extend_conversation("c", [{"role": "user", "content": "x"}])
        keys = [k async for k in raw.scan_iter(match=f"{prefix}*")]
        per_response = [k for k in keys if record.id.encode() in k]
        assert len(per_response) == 2  # record hash and log stream
        for key in keys:
            if key.endswith((b"responses", b"conversations", b"leased")):
                continue  # indexes, trimmed by expire()
            ttl = await raw.pttl(key)
            assert 0 < ttl <= 120_000, f"{key!r} has TTL {ttl}"
    finally:
        await raw.aclose()
        await store.aclose()
