"""A plain ``redis://`` store URL pointing at a Redis Cluster node is detected at startup (``INFO cluster`` says
``cluster_enabled:1``) and served by the cluster client, with a log line; a standalone server stays standalone.
Real servers: the local 3+3 cluster and a standalone ``redis-server`` the plugins start."""

from __future__ import annotations

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
