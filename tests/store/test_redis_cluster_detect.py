"""A plain ``redis://`` store URL pointing at a Redis Cluster node is detected at startup (``INFO cluster`` says
``cluster_enabled:1``) and served by the cluster client, with a log line; a standalone server stays standalone.
Real servers: the local 3+3 cluster and a standalone ``redis-server`` the plugins start."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from store_helpers import collect, entries, new_record

from plugins.redis_cluster import RedisCluster
from plugins.redis_server import RedisServer
from respstream.server.store.redis import RedisStore
from respstream.server.store.redis_client import detect_cluster

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]


async def test_a_plain_redis_url_to_a_cluster_node_uses_the_cluster_client(
        redis_cluster: RedisCluster, caplog: pytest.LogCaptureFixture) -> None:
    node = redis_cluster.ports[1]
    url = f"redis://127.0.0.1:{node}"
    with caplog.at_level(logging.INFO, logger="respstream.server.store"):
        store = RedisStore(url, prefix=f"d{uuid.uuid4().hex[:8]}:", instance_id="a")
    try:
        assert store.cluster is True
        assert any("Redis Cluster node (cluster_enabled:1)" in r.getMessage() for r in caplog.records)
        # Responses land on slots all over the cluster (most not on the node named in the URL): a standalone
        # client would get MOVED for them.
        records = [new_record() for _ in range(12)]
        for record in records:
            await store.create(record)
            await store.append(record.id, entries(0, 3, last_terminal=True))
        for record in records:
            got = await store.get(record.id)
            assert got is not None and got.id == record.id
            assert [e.sequence_number for e in await collect(store.tail(record.id))] == [0, 1, 2]
    finally:
        await store.aclose()


def test_a_cluster_url_with_a_database_number_is_refused(redis_cluster: RedisCluster) -> None:
    url = f"redis://127.0.0.1:{redis_cluster.ports[2]}/3"
    with pytest.raises(ValueError, match="database 0"):
        detect_cluster(url)


async def test_a_standalone_server_stays_standalone(redis_server: RedisServer) -> None:
    assert detect_cluster(redis_server.url) == redis_server.url
    store = RedisStore(redis_server.url, prefix=f"d{uuid.uuid4().hex[:8]}:")
    try:
        assert store.cluster is False
        record = new_record()
        await store.create(record)
        assert (await store.get(record.id)) is not None
    finally:
        await store.aclose()


def test_an_unreachable_server_is_taken_as_standalone(caplog: pytest.LogCaptureFixture) -> None:
    from plugins.redis_server import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    with caplog.at_level(logging.WARNING, logger="respstream.server.store"):
        assert detect_cluster(url) == url
    assert any("could not ask whether it is a Redis Cluster" in r.getMessage() for r in caplog.records)


async def test_more_calls_at_once_than_a_nodes_connections_wait_their_turn(redis_cluster: RedisCluster) -> None:
    """redis-py's cluster pool raises MaxConnectionsError instead of waiting once a node's connections are all in
    use, and its pipeline "retries" that by closing every connection to every node and sleeping 0.25 s (under load
    the retry fails too: store_unavailable). Hundreds of readers resuming at once must queue instead."""
    from respstream.server.store.redis_client import COMMAND_CONNECTIONS

    store = RedisStore(redis_cluster.url, prefix=f"q{uuid.uuid4().hex[:8]}:", instance_id="q")
    resets = 0
    close = store._r.aclose

    async def counted_close() -> None:
        nonlocal resets
        resets += 1
        await close()

    store._r.aclose = counted_close  # the client-wide reset redis-py does on an exhausted pool
    try:
        record = new_record()
        await store.create(record)
        await store.append(record.id, entries(0, 5, last_terminal=True))
        calls = 6 * COMMAND_CONNECTIONS  # one response: one slot, one node
        reads = await asyncio.gather(*(store.read(record.id, after=i % 4) for i in range(calls)))
        assert [len(r) for r in reads] == [4 - i % 4 for i in range(calls)]
        tails = await asyncio.gather(*(collect(store.tail(record.id, after=-1)) for _ in range(calls)))
        assert all([e.sequence_number for e in t] == [0, 1, 2, 3, 4] for t in tails)
        assert resets == 0
    finally:
        store._r.aclose = close
        await store.aclose()
