"""Open a store from its URL: ``memory``, ``sqlite:///path/to/file.db``, ``redis://host:port/db``.

The SQLite and Redis implementations are imported only when asked for, so a memory-only gateway never loads them.
"""

from __future__ import annotations

import importlib
from typing import Any, cast

from respstream.server.store.base import Store
from respstream.server.store.memory import MemoryStore

__all__ = ["open_store"]


def open_store(
    url: str,
    *,
    instance_id: str | None = None,
    retention_seconds: float = 24 * 3600,
    history_limit: int = 1000,
) -> Store:
    """Build the store named by ``url``. Raises ``ValueError`` for a URL it does not understand."""
    if url in ("memory", "memory://", "memory:"):
        return MemoryStore(retention_seconds=retention_seconds, history_limit=history_limit)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///path/to/file.db")
        module: Any = importlib.import_module("respstream.server.store.sqlite")
        return cast(Store, module.SQLiteStore(path))
    if url.startswith(("redis://", "rediss://", "unix://")):
        module = importlib.import_module("respstream.server.store.redis")
        return cast(Store, module.RedisStore(url, instance_id=instance_id))
    raise ValueError(f"unknown store URL {url!r}: use memory, sqlite:///path/to/file.db or redis://host:port/db")
