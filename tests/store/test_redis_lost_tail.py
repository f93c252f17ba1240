"""Issue 16: a Redis failover that loses acknowledged appends never leaves a hole in a log.

Redis replicates asynchronously, so a replica that takes over may lack the last appends its primary acknowledged.
Two ways of producing exactly that state on a real Redis:

- standalone, by real replication: a second ``redis-server`` replicates the first, is cut off (``REPLICAOF NO
  ONE``) while the writer keeps appending, and then the first one is made its replica, so the replication full sync
  replaces the first one's data with the replica's (the acknowledged tail is gone, as after a failover), and is
  promoted back;
- standalone and Redis Cluster: the response's keys are copied (``DUMP``) and put back (``RESTORE ... REPLACE``)
  after more appends, the state a promoted replica that missed those appends holds.

Then the next append is refused by the script (a gap), the store resends the lost entries from its buffer, and the
final log is gap-free, duplicate-free, equal to everything appended and to what a live reader saw. With a buffer
too small for the loss, the append fails with ``SequenceGap`` and the log keeps no hole.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
import redis.asyncio as aioredis
from store_helpers import StoreFactory, collect, entries, new_record

from plugins.redis_cluster import RedisCluster, _cli
from plugins.redis_server import RedisServer
from respstream.server.store.base import SequenceGap, StoreUnavailable
from respstream.server.store.redis import RedisStore

pytestmark = [pytest.mark.redis, pytest.mark.timeout(90)]


async def _snapshot(store: RedisStore, response_id: str) -> list[tuple[str, bytes]]:
    rec, log, _ = store._keys(response_id)
    return [(key, await store._r.dump(key)) for key in (rec, log)]


async def _put_back(store: RedisStore, snapshot: list[tuple[str, bytes]]) -> None:
    """The response's keys as they were at the snapshot (what a replica that missed the later writes holds)."""
    for key, data in snapshot:
        await store._r.restore(key, 0, data, replace=True)


@pytest.mark.parametrize("backend", ["redis", "redis-cluster"])
async def test_a_lost_tail_is_resent_and_readers_see_one_gap_free_log(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert isinstance(store, RedisStore)
    record = new_record()
    await store.create(record)
    reader = asyncio.create_task(collect(store.tail(record.id)))
    await store.append(record.id, entries(0, 10))
    snapshot = await _snapshot(store, record.id)
    await store.append(record.id, entries(10, 15))
    await store.append(record.id, entries(15, 20))  # acknowledged; the "replica" below never got 10..19
    await asyncio.sleep(0.2)  # the reader sees 0..19 on the "old primary"
    await _put_back(store, snapshot)
    assert [e.sequence_number for e in await store.read(record.id)] == list(range(10))  # the tail is gone

    await store.append(record.id, entries(20, 25))  # refused as a gap by the script; 10..19 resent first
    await store.append(record.id, entries(25, 30, last_terminal=True))

    want = entries(0, 30, last_terminal=True)
    assert await store.read(record.id) == want
    assert store.resent == 10
    assert await asyncio.wait_for(reader, 10) == want  # each event once, in order, the same bytes


@pytest.mark.parametrize("backend", ["redis", "redis-cluster"])
async def test_a_loss_larger_than_the_buffer_fails_with_sequence_gap(store_factory: StoreFactory) -> None:
    store = store_factory(resend_entries=4)
    assert isinstance(store, RedisStore)
    record = new_record()
    await store.create(record)
    await store.append(record.id, entries(0, 3))
    snapshot = await _snapshot(store, record.id)
    await store.append(record.id, entries(3, 13))  # 10 entries; only the last 4 are kept for resending
    await _put_back(store, snapshot)
    with pytest.raises(SequenceGap) as refused:
        await store.append(record.id, entries(13, 14))
    assert refused.value.log_next == 3 and "resend" in str(refused.value)
    assert [e.sequence_number for e in await store.read(record.id)] == [0, 1, 2]  # no hole was written
    assert store.resent == 0


async def _role(client: aioredis.Redis, role: str, deadline_s: float = 15) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        info: dict[str, Any] = await client.info("replication")
        if info.get("role") == role and (role == "master" or info.get("master_link_status") == "up"):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"redis did not become {role} in time: {info}")
        await asyncio.sleep(0.05)


async def test_a_real_replication_loss_is_repaired(tmp_path: Path) -> None:
    """Both servers private: the first is the store's primary, the second its replica."""
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary, replica = RedisServer(data_dir=str(tmp_path / "p")), RedisServer(data_dir=str(tmp_path / "r"))
    primary.start()
    replica.start()
    store = RedisStore(primary.url, instance_id="w", prefix="lost:")
    p = aioredis.from_url(primary.url)
    r = aioredis.from_url(replica.url)
    try:
        for node in (p, r):
            await node.config_set("repl-diskless-sync-delay", 0)  # full syncs start at once, not 5 s later
        await r.replicaof("127.0.0.1", primary.port)
        await _role(r, "slave")
        record = new_record()
        await store.create(record)
        reader = asyncio.create_task(collect(store.tail(record.id)))
        await store.append(record.id, entries(0, 10))
        await p.set("replicated", 1)  # after 0..9 in the replication stream: once the replica has it, it has them
        deadline = time.monotonic() + 10
        while await r.get("replicated") is None:
            assert time.monotonic() < deadline, await r.info("replication")
            await asyncio.sleep(0.02)
        await r.replicaof("NO", "ONE")  # cut off: it keeps 0..9 and misses what follows
        await _role(r, "master")
        await store.append(record.id, entries(10, 20))  # acknowledged by the primary only
        await asyncio.sleep(0.2)
        # "Failover": the replica's data wins (the old primary resyncs from it, as a returning old primary does),
        # then the old primary's address serves as primary again, holding 0..9 only.
        await p.replicaof("127.0.0.1", replica.port)
        await _role(p, "slave")
        await p.replicaof("NO", "ONE")
        await _role(p, "master")
        assert [e.sequence_number for e in await store.read(record.id)] == list(range(10))

        await store.append(record.id, entries(20, 30, last_terminal=True))
        want = entries(0, 30, last_terminal=True)
        assert await store.read(record.id) == want
        assert store.resent == 10
        assert await asyncio.wait_for(reader, 15) == want
    finally:
        await store.aclose()
        await p.aclose()
        await r.aclose()
        primary.stop()
        replica.stop()


def _replica_of(cluster: RedisCluster, primary: int, timeout: float = 15) -> int:
    """The port of ``primary``'s online replica, as the primary itself reports it (another node's CLUSTER NODES
    can lag behind the gossip just after the cluster formed)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in _cli(primary, "INFO", "replication").splitlines():
            if line.startswith("slave") and "state=online" in line:
                fields = dict(part.split("=", 1) for part in line.split(":", 1)[1].split(","))
                return int(fields["port"])
        if time.monotonic() > deadline:
            pytest.fail(f"primary {primary} of the test cluster ({cluster.ports}) has no online replica")
        time.sleep(0.1)


async def _read_when_up(store: RedisStore, response_id: str, deadline_s: float = 30) -> list[int]:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return [e.sequence_number for e in await store.read(response_id)]
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_a_real_cluster_failover_to_a_replica_that_missed_appends_is_repaired() -> None:
    """A private 3+3 cluster. The replica of the response's slot is frozen (SIGSTOP), its primary drops the
    replication link (``CLIENT KILL TYPE replica``), acknowledges 10 more appends and is killed (SIGKILL); the
    replica, thawed, never got them and takes over. The next append is refused as a gap and the
    store resends them."""
    cluster = RedisCluster()
    cluster.start()
    store = RedisStore(cluster.url, instance_id="w", prefix="cl:", lease_seconds=2.0)
    try:
        record = new_record()
        await store.create(record)
        await store.append(record.id, entries(0, 10))
        primary = cluster.primary_for(store._keys(record.id)[0])
        replica = _replica_of(cluster, primary)
        on_replica = sync_redis.Redis(port=replica, single_connection_client=True)
        on_replica.execute_command("READONLY")  # a cluster replica answers reads on this connection
        deadline = time.monotonic() + 10
        while on_replica.xlen(store._keys(record.id)[1]) != 10:  # 0..9 are on the replica
            assert time.monotonic() < deadline, "the replica never got the first appends"
            await asyncio.sleep(0.02)
        on_replica.close()
        stopped = cluster.processes[replica]
        stopped.send_signal(signal.SIGSTOP)  # frozen, it cannot reconnect when its link is dropped
        try:
            _cli(primary, "CLIENT", "KILL", "TYPE", "replica")
            await store.append(record.id, entries(10, 20))  # acknowledged by the primary alone
            cluster.kill(primary)
        finally:
            stopped.send_signal(signal.SIGCONT)  # within the node timeout: it stays a candidate for the failover
        cluster.wait_ok(timeout=60)
        assert await _read_when_up(store, record.id) == list(range(10)), "the failover lost nothing"

        for _ in range(100):  # the first appends after a failover may still meet the old topology
            try:
                await store.append(record.id, entries(20, 30, last_terminal=True))
                break
            except StoreUnavailable:
                await asyncio.sleep(0.2)
        want = entries(0, 30, last_terminal=True)
        assert await store.read(record.id) == want
        assert store.resent == 10
    finally:
        await store.aclose()
        cluster.stop()
