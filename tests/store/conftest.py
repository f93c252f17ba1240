"""Fixtures for the shared store suite: one ``store`` per backend, and a factory for more instances on the same data.

``store_factory(**options)`` opens another store over the same backing data (the same SQLite file, the same Redis
key prefix) — "another gateway instance" — and closes it after the test.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, so `plugins.*` imports like the top conftest's

from store_helpers import LEASE, RETENTION, StoreFactory

from plugins.redis_cluster import RedisCluster, redis_cluster
from plugins.redis_server import RedisServer, redis_server
from respstream.server.store.base import Store

__all__ = ["BACKENDS", "redis_cluster", "redis_server"]

BACKENDS = ["memory", "sqlite", "redis", "redis-cluster"]


def _memory(**options: Any) -> Store:
    try:
        from respstream.server.store.memory import MemoryStore
    except ImportError:
        pytest.skip("respstream.server.store.memory.MemoryStore is not written yet (GATEWAY owns it)")
    options.pop("instance_id", None)
    options.pop("lease_seconds", None)
    return MemoryStore(**options)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def store_factory(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    opened: list[Store] = []
    server: RedisServer | None = request.getfixturevalue("redis_server") if backend == "redis" else None
    cluster: RedisCluster | None = request.getfixturevalue("redis_cluster") if backend == "redis-cluster" else None
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    memory: list[Store] = []

    def open_store(**options: Any) -> Store:
        options.setdefault("retention_seconds", RETENTION)
        options.setdefault("lease_seconds", LEASE)
        options.setdefault("instance_id", f"inst-{len(opened)}")
        store: Store
        if backend == "memory":
            if memory:  # one process: "another instance" is the same object
                return memory[0]
            store = _memory(**options)
            memory.append(store)
        elif backend == "sqlite":
            from respstream.server.store.sqlite import SQLiteStore

            store = SQLiteStore(str(tmp_path / "store.db"), poll_interval=0.05, **options)
        else:
            try:
                from respstream.server.store.redis import RedisStore
            except ImportError:
                pytest.skip("respstream.server.store.redis is not written yet")
            url = cluster.url if cluster is not None else server.url if server is not None else ""
            store = RedisStore(url, prefix=prefix, **options)
        opened.append(store)
        return store

    yield open_store
    for store in reversed(opened):
        await store.aclose()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    return store_factory()
