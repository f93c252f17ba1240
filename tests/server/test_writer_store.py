"""The writer against a store that moved on without it: a terminal refused because someone else ended the log makes
the record say what the log says; a deleted log stops the writer; a store outage keeps the batch for a retry."""

from __future__ import annotations

from typing import Any

import pytest

from respstream.server.events.dialects import get_dialect
from respstream.server.events.writer import ResponseDeleted, ResponseWriter
from respstream.server.store.base import LogEntry, ResponseRecord, SequenceConflict, StoreUnavailable
from respstream.server.store.lease import worker_lost_entries
from respstream.server.store.memory import MemoryStore


async def _started(dialect: str) -> tuple[MemoryStore, ResponseRecord, ResponseWriter]:
    store = MemoryStore()
    record = ResponseRecord(id="r1", status="in_progress", created_at=1.0, dialect=dialect)
    response: dict[str, Any] = {"id": "r1", "object": "response", "status": "in_progress", "output": []}
    await store.create(record)
    writer = ResponseWriter(record, dialect=get_dialect(dialect), store=store, response=response)
    writer.start()
    await writer.flush()
    return store, record, writer


@pytest.mark.parametrize("dialect", ["platform", "openai"])
async def test_refused_terminal_adopts_the_logs_outcome(dialect: str) -> None:
    store, record, writer = await _started(dialect)
    lost = worker_lost_entries(record, writer.next_sequence_number)  # another instance ended the log
    await store.append("r1", lost)
    await store.update(ResponseRecord(id="r1", status="failed", created_at=1.0, dialect=dialect))
    writer.complete()  # our terminal, late: its record update lands, then its append is refused
    with pytest.raises(SequenceConflict):
        await writer.flush()
    got = await store.get("r1")
    assert got is not None and got.status == "failed"
    assert got.response["status"] == "failed" and got.response["error"]["code"] == "worker_lost"


async def test_cancel_from_elsewhere_is_adopted_too() -> None:
    store, record, writer = await _started("platform")
    other = ResponseWriter.continuing(record, dialect=get_dialect("platform"), store=store,
                                      next_sequence_number=writer.next_sequence_number)
    other.fail("cancelled", "The response was cancelled.")
    await store.append("r1", other.take_pending())
    writer.complete()
    with pytest.raises(SequenceConflict):
        await writer.flush()
    got = await store.get("r1")
    assert got is not None and got.status == "cancelled"


async def test_deleted_log_raises_response_deleted() -> None:
    store, _, writer = await _started("platform")
    await store.delete("r1")
    writer.complete()
    with pytest.raises(ResponseDeleted):
        await writer.flush()


class FlakyStore(MemoryStore):
    """SIMULATED outage: the next `fail` appends raise StoreUnavailable."""

    fail = 0

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        if self.fail:
            self.fail -= 1
            raise StoreUnavailable("down")
        await super().append(response_id, entries)


async def test_store_outage_keeps_the_batch_so_the_log_has_no_gap() -> None:
    store = FlakyStore()
    record = ResponseRecord(id="r1", status="in_progress", created_at=1.0)
    await store.create(record)
    writer = ResponseWriter(record, dialect=get_dialect("platform"), store=store,
                            response={"id": "r1", "object": "response", "status": "in_progress", "output": []})
    writer.start()
    store.fail = 1
    with pytest.raises(StoreUnavailable):
        await writer.flush()
    writer.fail("store_unavailable", "down")
    await writer.flush()
    log = await store.read("r1")
    assert [e.sequence_number for e in log] == [0, 1] and log[-1].terminal
