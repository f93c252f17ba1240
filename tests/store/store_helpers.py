"""Small builders shared by the store tests."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable

import orjson

from respstream.server.store.base import LogEntry, ResponseRecord, Store

__all__ = ["LEASE", "RETENTION", "StoreFactory", "collect", "entries", "event", "new_record", "write_log"]

LEASE = 0.6  # seconds; short so lease-expiry tests stay fast
RETENTION = 3600.0

StoreFactory = Callable[..., Store]


def new_record(*, dialect: str = "platform", instance_id: str | None = None, created_at: float | None = None,
               status: str = "in_progress") -> ResponseRecord:
    rid = uuid.uuid4().hex
    return ResponseRecord(
        id=rid, status=status, created_at=time.time() if created_at is None else created_at, dialect=dialect,
        instance_id=instance_id, response={"id": rid, "object": "response", "status": status, "output": []},
    )


def event(seq: int, *, terminal: bool = False) -> LogEntry:
    kind = "response.completed" if terminal else "response.output_text.delta"
    payload = {"type": kind, "sequence_number": seq, "delta": f"d{seq}"}
    return LogEntry(seq, kind, orjson.dumps(payload), terminal)


def entries(start: int, stop: int, *, last_terminal: bool = False) -> list[LogEntry]:
    """Events ``start .. stop-1``; the last one terminal when asked."""
    return [event(s, terminal=last_terminal and s == stop - 1) for s in range(start, stop)]


async def collect(stream: AsyncIterator[LogEntry], limit: int = 100_000) -> list[LogEntry]:
    out: list[LogEntry] = []
    async for item in stream:
        out.append(item)
        assert len(out) <= limit, "tail did not end"
    return out


async def write_log(store: Store, response_id: str, total: int, batch: int, *, pause: float = 0.0) -> None:
    """Append ``total`` events in batches, the last terminal, yielding to the loop between batches."""
    for start in range(0, total, batch):
        stop = min(start + batch, total)
        await store.append(response_id, entries(start, stop, last_terminal=stop == total))
        await asyncio.sleep(pause)
