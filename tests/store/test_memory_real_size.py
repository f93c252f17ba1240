"""Issue 42 H4v: the memory store charges a record what it really holds, before storing it.

Before: ``_record_bytes`` counted JSON length. A ``store: false`` WebSocket turn of 30,000 tiny input items held
17.4 MB and was charged 4.3 MB, so 32 sockets of 4 keys grew the gateway by 1.28 GB against a 256 MiB budget. Now
the request is kept as compact JSON bytes (its charge exact) and the Response snapshot is measured object by object
(store/memory.py, store/object_size.py). Memory is measured with tracemalloc: what stays allocated once the caller
has dropped every reference of its own.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from typing import Any

import msgspec
import pytest

from respstream.server.events.dialects import get_dialect
from respstream.server.inputs.input_records import input_item_records
from respstream.server.inputs.requests import parse_request
from respstream.server.store.base import LogEntry, ResponseRecord, StoreUnavailable
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.store.memory import MemoryStore
from respstream.server.store.memory_budgeted import BudgetedMemoryStore

ITEMS = 30_000


def _record(rid: str, items: int = ITEMS) -> ResponseRecord:
    """A ``store: false`` turn of ``items`` tiny messages, as the service records it."""
    dialect = get_dialect("openai")
    body = {"model": "auto", "store": False, "input": [{"role": "user", "content": "hi"} for _ in range(items)]}
    req = parse_request(body, server_tool_names=[], dialect="openai")
    request = {"store": False, "input_items": input_item_records(req.input, dialect)}
    response = {"id": rid, "object": "response", "status": "in_progress", "output": [], "metadata": {},
                "tools": [], "instructions": None}
    return ResponseRecord(id=rid, status="in_progress", created_at=time.time(), response=response, request=request)


def _held_after(store: MemoryStore, make: Any) -> int:
    """Bytes still allocated after ``make(store)`` once its own references are gone."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        asyncio.run(make(store))
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_record_is_charged_the_memory_it_holds() -> None:
    store = MemoryStore()

    async def create(store: MemoryStore) -> None:
        await store.create(_record("resp_1"))

    held = _held_after(store, create)
    print(f"record of {ITEMS} items: holds {held} bytes, charged {store.bytes}")
    # Before: holds ~15.8 MB, charged ~4.3 MB (the JSON length).
    assert abs(store.bytes - held) < held // 20, (held, store.bytes)
    record = asyncio.run(store.get("resp_1"))
    assert record is not None and len(record.request["input_items"]) == ITEMS  # handed back whole
    assert record.request["input_items"][0]["content"] == [{"type": "input_text", "text": "hi"}]


def test_the_log_is_charged_the_memory_it_holds() -> None:
    store = MemoryStore()

    async def fill(store: MemoryStore) -> None:
        await store.create(_record("resp_1", items=1))
        encode = msgspec.json.Encoder().encode
        events = [bytes(memoryview(encode({"type": "response.output_item.added", "sequence_number": n,
                                           "item": {"id": f"fc_{n}", "arguments": "x" * (n % 700)}})))
                  for n in range(2000)]
        store.append_nowait("resp_1", [LogEntry(n, "response.output_item.added", e) for n, e in enumerate(events)])

    held = _held_after(store, fill)
    print(f"log of 2000 events: holds {held} bytes, charged {store.bytes}")
    assert abs(store.bytes - held) < held // 16, (held, store.bytes)  # before: 9% under


def test_the_shared_budgets_are_charged_the_real_size_before_storing() -> None:
    size = 4_000_000  # the record of 30,000 items takes ~4.3 MB: over a 4 MB share of one key
    key_budget = ByteBudget(total=64 << 20, per_holder=size)
    store = BudgetedMemoryStore(budget=key_budget, holder="key-a")
    record = _record("resp_1")
    with pytest.raises(StoreUnavailable) as info:
        store.check_room(record)  # asked before the work that precedes create (responses_service.start)
    assert "websocket_store_max_bytes_per_key" in str(info.value)
    with pytest.raises(StoreUnavailable):
        asyncio.run(store.create(record))
    assert key_budget.used == 0 and store.bytes == 0  # refused before anything was stored
    total = ByteBudget(total=size, per_holder=64 << 20, outside=lambda: 0)
    with pytest.raises(StoreUnavailable) as info:
        asyncio.run(BudgetedMemoryStore(budget=total, holder="key-b").create(record))
    assert "memory_store_max_bytes" in str(info.value)
    roomy = BudgetedMemoryStore(budget=ByteBudget(total=64 << 20, per_holder=64 << 20), holder="key-c")
    asyncio.run(roomy.create(record))
    assert roomy.budget.held("key-c") == roomy.bytes > size
    asyncio.run(roomy.aclose())
    assert roomy.budget.used == 0
