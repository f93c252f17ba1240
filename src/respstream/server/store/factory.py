"""Open a store from its URL: ``memory``, ``sqlite:///path/to/file.db``, ``redis://host:port/db``.

``sqlite:///`` is followed by the file path, so ``sqlite:///data/r.db`` is the relative path ``data/r.db`` and
``sqlite:////var/lib/r.db`` the absolute ``/var/lib/r.db`` (the SQLAlchemy convention); the parent folder is created.
The SQLite and Redis implementations are imported only when asked for, so a memory-only gateway never loads them.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, cast

from respstream.server.store.base import Store, StoreUnavailable
from respstream.server.store.memory import MemoryStore

__all__ = ["is_memory_url", "open_store"]


def is_memory_url(url: str) -> bool:
    return url in ("memory", "memory://", "memory:")


def open_store(
    url: str,
    *,
    instance_id: str | None = None,
    retention_seconds: float = 24 * 3600,
    lease_seconds: float = 10.0,
    history_limit: int = 1000,
) -> Store:
    """Build the store named by ``url``. Raises ``ValueError`` for a URL it does not understand,
    ``StoreUnavailable`` when an SQLite file cannot be opened (Redis connects lazily, on first use)."""
    if is_memory_url(url):
        return MemoryStore(retention_seconds=retention_seconds, history_limit=history_limit)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///path/to/file.db")
        try:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the folder for {path!r}: {exc.strerror or exc}") from exc
        module: Any = importlib.import_module("respstream.server.store.sqlite")
        return cast(Store, module.SQLiteStore(str(Path(path).expanduser()), retention_seconds=retention_seconds,
                                              instance_id=instance_id, lease_seconds=lease_seconds))
    if url.startswith(("redis://", "rediss://", "unix://")):
        module = importlib.import_module("respstream.server.store.redis")
        return cast(Store, module.RedisStore(url, instance_id=instance_id, lease_seconds=lease_seconds,
                                             retention_seconds=retention_seconds, history_limit=history_limit))
    raise ValueError(f"unknown store URL {url!r}: use memory, sqlite:///path/to/file.db or redis://host:port/db")
