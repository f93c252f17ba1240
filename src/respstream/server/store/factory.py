"""Open a store from its URL: ``memory``, ``sqlite:///path/to/file.db``, ``redis://host:port/db``,
``redis+cluster://host:port[,host:port...]`` (Redis Cluster; see ``redis_client.py``).

``sqlite:///`` is followed by the file path, so ``sqlite:///data/r.db`` is the relative path ``data/r.db`` and
``sqlite:////var/lib/r.db`` the absolute ``/var/lib/r.db`` (the SQLAlchemy convention); the parent folder is created.
The SQLite and Redis implementations are imported only when asked for, so a memory-only gateway never loads them.
(``sqlite3`` itself is imported here only for typing the SQLite store's writes.)
"""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from respstream.server.store.base import Store, StoreUnavailable
from respstream.server.store.memory import DEFAULT_MAX_BYTES, MemoryStore

__all__ = ["STORE_URL_HELP", "is_known_store_url", "is_memory_url", "open_store"]

T = TypeVar("T")


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")
STORE_URL_HELP = ("use memory, sqlite:///path/to/file.db, redis://host:port/db or "
                  "redis+cluster://host:port,host:port")


def is_memory_url(url: str) -> bool:
    return url in ("memory", "memory://", "memory:")


def is_known_store_url(url: str) -> bool:
    """Whether ``open_store`` knows the URL's kind (the CLI checks this before building anything)."""
    return is_memory_url(url) or url.startswith(("sqlite:///", *_REDIS_SCHEMES))


def _shielded_sqlite(path: str, **options: Any) -> Store:
    """An SQLiteStore whose writes cannot be cancelled half way.

    Why: its writer thread sets the result of every job's ``concurrent.futures.Future``; if the awaiting task was
    cancelled (a lease renewal stopped at the end of a response, a reader that disconnected while ending a lost log,
    shutdown), that future is already cancelled, ``set_result`` raises ``InvalidStateError`` and the writer thread
    dies, so every later write hangs. Shielding each write lets it finish; the cancelled caller still gets its
    ``CancelledError``. (The writer thread, sqlite_writer.py, now also skips jobs cancelled before they run; the
    shield keeps started writes whole.)
    """
    from respstream.server.store.sqlite import SQLiteStore

    class ShieldedSQLiteStore(SQLiteStore):
        async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
            return await asyncio.shield(super()._write(job))

    return ShieldedSQLiteStore(path, **options)


def open_store(
    url: str,
    *,
    instance_id: str | None = None,
    retention_seconds: float = 24 * 3600,
    lease_seconds: float = 10.0,
    history_limit: int = 1000,
    memory_max_bytes: int = DEFAULT_MAX_BYTES,
    redis_resend_entries: int = 256,
    redis_resend_max_bytes: int = 64 << 20,
) -> Store:
    """Build the store named by ``url``. Raises ``ValueError`` for a URL it does not understand,
    ``StoreUnavailable`` when an SQLite file cannot be opened (Redis connects lazily, on first use)."""
    if is_memory_url(url):
        return MemoryStore(retention_seconds=retention_seconds, history_limit=history_limit, max_bytes=memory_max_bytes)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///path/to/file.db")
        try:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the folder for {path!r}: {exc.strerror or exc}") from exc
        return _shielded_sqlite(str(Path(path).expanduser()), retention_seconds=retention_seconds,
                                instance_id=instance_id, lease_seconds=lease_seconds)
    if url.startswith(_REDIS_SCHEMES):
        module = importlib.import_module("respstream.server.store.redis")
        return cast(Store, module.RedisStore(url, instance_id=instance_id, lease_seconds=lease_seconds,
                                             retention_seconds=retention_seconds, history_limit=history_limit,
                                             resend_entries=redis_resend_entries,
                                             resend_max_bytes=redis_resend_max_bytes))
    raise ValueError(f"unknown store URL {url!r}: {STORE_URL_HELP}")
