"""The deferred-work queue (store/deferred_queue.py) for a store URL."""

from __future__ import annotations

from pathlib import Path

from respstream.server.store.deferred_queue import DeferredQueue, MemoryDeferredQueue

__all__ = ["open_deferred_queue"]


def open_deferred_queue(url: str) -> DeferredQueue:
    """The queue on the store at ``url`` (the background store's URL): SQLite, Redis or (else) in memory."""
    if url.startswith("sqlite://"):
        from respstream.server.store.deferred_sqlite import SQLiteDeferredQueue

        return SQLiteDeferredQueue(str(Path(url[len("sqlite:///"):]).expanduser()))  # (as store/factory.py reads it)
    if url.startswith(("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")):
        from respstream.server.store.deferred_redis import RedisDeferredQueue

        return RedisDeferredQueue(url)
    return MemoryDeferredQueue()
