"""Issue 42, M5 remainder: the memory store seeks a conversation's cursor through an id -> position index (a page costs
the page, not the history) and counts the items in its bytes at their real size (a huge conversation is refused by
``memory_store_max_bytes``, not grown past it).

Before: a page after the deepest cursor copied windows growing 4x (slices of references) and scanned them; the items
were counted in no budget. Memory is Python's own allocation (tracemalloc); no times are asserted.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import pytest

from respstream.server.store.base import ResponseRecord, StoreUnavailable
from respstream.server.store.conversation_seek import conversation_after
from respstream.server.store.memory import MemoryStore

pytestmark = pytest.mark.timeout(60)

ITEMS = 100_000


def _items(start: int, n: int, text: str = "hello") -> list[dict[str, Any]]:
    return [{"id": f"msg_{i}", "type": "message", "role": "user", "content": [{"type": "input_text",
                                                                                 "text": f"{text} {i}"}]}
            for i in range(start, start + n)]


def test_a_page_at_the_deepest_cursor_costs_the_page() -> None:
    store = MemoryStore(history_limit=ITEMS, max_bytes=1 << 30)
    asyncio.run(store.extend_conversation("conv_big", _items(0, ITEMS)))

    async def page(cursor: str, newer: bool) -> list[dict[str, Any]] | None:
        return await conversation_after(store, "conv_big", cursor, count=1, newer=newer)

    for cursor, newer, want in (("msg_0", False, ["msg_0"]), (f"msg_{ITEMS - 1}", True, [f"msg_{ITEMS - 1}"]),
                                ("msg_0", True, ["msg_0", "msg_1"])):
        tracemalloc.start()
        try:
            found = asyncio.run(page(cursor, newer))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert found is not None and [item["id"] for item in found] == want
        # Before: slices of up to the whole history (100,000 references: 800 KB) for the deepest cursor.
        assert peak < 64 << 10, (cursor, newer, peak)


def test_items_are_counted_at_their_real_size_and_given_back() -> None:
    store = MemoryStore(history_limit=ITEMS, max_bytes=1 << 30)
    items = _items(0, 20_000, "some words of a user's message")
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        held = _items(0, 20_000, "some words of a user's message")
        real = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del held
    asyncio.run(store.extend_conversation("conv_a", items))
    # Measured: the items themselves (what building them allocated) plus the store's slots and index.
    assert real <= store.bytes <= 1.3 * real + 20_000 * 64, (real, store.bytes)
    asyncio.run(store.delete_conversation_item("conv_a", "msg_7"))
    after_delete = store.bytes
    assert after_delete < 20_000 * 64 + 1.3 * real and asyncio.run(store.conversation_item("conv_a", "msg_7")) is None
    asyncio.run(store.delete_conversation("conv_a"))
    assert store.bytes == 0


def test_a_huge_conversation_is_refused_past_the_budget_and_finished_responses_make_room() -> None:
    store = MemoryStore(history_limit=10 * ITEMS, max_bytes=4 << 20)
    done = ResponseRecord(id="resp_done", status="completed", created_at=1e12, response={"output": "x" * (1 << 20)})
    asyncio.run(store.create(done))
    assert store.bytes > 1 << 20
    with pytest.raises(StoreUnavailable, match="memory_store_max_bytes"):
        for start in range(0, 10 * ITEMS, 1000):
            asyncio.run(store.extend_conversation("conv_huge", _items(start, 1000)))
    assert store.bytes <= 4 << 20
    assert asyncio.run(store.get("resp_done")) is None  # the finished response was dropped first
    kept = asyncio.run(store.conversation("conv_huge"))
    assert kept and len(kept) % 1000 == 0  # a batch is stored whole or not at all


def test_the_index_follows_the_sliding_window_deletes_and_duplicate_ids() -> None:
    store = MemoryStore(history_limit=4)

    async def ids(cursor: str, count: int, newer: bool) -> list[str] | None:
        found = await conversation_after(store, "c", cursor, count=count, newer=newer)
        return None if found is None else [item["id"] for item in found]

    async def run() -> None:
        await store.extend_conversation("c", [{"id": f"i{n}"} for n in range(3)])
        await store.extend_conversation("c", [{"id": f"i{n}"} for n in range(3, 7)])
        assert [item["id"] for item in await store.conversation("c")] == ["i3", "i4", "i5", "i6"]
        assert await ids("i2", 1, True) is None
        assert await ids("i4", 1, True) == ["i4", "i5"]
        assert await ids("i4", 9, False) == ["i3", "i4"]
        assert await store.delete_conversation_item("c", "i4") is True
        assert await ids("i5", 1, False) == ["i3", "i5"]
        await store.extend_conversation("c", [{"id": "i3", "n": 2}, {"id": "i8"}])  # i3 again: the newest is found
        assert [item["id"] for item in await store.conversation("c")] == ["i5", "i6", "i3", "i8"]
        assert await ids("i3", 0, True) == ["i3"] and await ids("i8", 1, False) == ["i3", "i8"]
        assert await store.delete_conversation_item("c", "i5") is True
        assert await ids("i6", 2, True) == ["i6", "i3", "i8"]

    asyncio.run(run())
