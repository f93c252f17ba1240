"""The Conversations API part of the store contract, for every store (memory, sqlite, redis)."""

from __future__ import annotations

import time

import pytest
from store_helpers import RETENTION, StoreFactory

from respstream.server.store.base import ConversationRecord, Store

pytestmark = pytest.mark.timeout(60)


def _record(cid: str = "conv_1", owner: str | None = "owner-a") -> ConversationRecord:
    return ConversationRecord(id=cid, created_at=time.time(), owner=owner, metadata={"topic": "demo"})


async def test_conversation_object_create_get_update_delete(store: Store) -> None:
    assert await store.get_conversation("conv_1") is None
    record = _record()
    await store.create_conversation(record)
    assert await store.get_conversation("conv_1") == record
    record.metadata = {"topic": "changed", "n": "2"}
    await store.update_conversation(record)
    got = await store.get_conversation("conv_1")
    assert got is not None and got.metadata == {"topic": "changed", "n": "2"} and got.owner == "owner-a"
    await store.extend_conversation("conv_1", [{"id": "i1", "type": "message"}])
    assert await store.delete_conversation("conv_1") is True
    assert await store.get_conversation("conv_1") is None
    assert await store.conversation("conv_1") == []  # the items went with it
    assert await store.delete_conversation("conv_1") is False


async def test_update_of_a_missing_conversation_is_a_noop(store: Store) -> None:
    await store.update_conversation(_record("conv_missing"))
    assert await store.get_conversation("conv_missing") is None


async def test_returned_records_are_copies(store: Store) -> None:
    await store.create_conversation(_record("conv_copy"))
    got = await store.get_conversation("conv_copy")
    assert got is not None
    got.metadata["mutated"] = "yes"
    again = await store.get_conversation("conv_copy")
    assert again is not None and "mutated" not in again.metadata


async def test_delete_one_item_by_id(store: Store) -> None:
    await store.extend_conversation("conv_items", [{"id": "a", "n": 1}, {"id": "b", "n": 2}, {"id": "c", "n": 3}])
    assert await store.delete_conversation_item("conv_items", "b") is True
    assert [i["id"] for i in await store.conversation("conv_items")] == ["a", "c"]
    assert await store.delete_conversation_item("conv_items", "b") is False
    assert await store.delete_conversation_item("conv_other", "a") is False
    await store.extend_conversation("conv_items", [{"id": "d", "n": 4}])
    assert [i["id"] for i in await store.conversation("conv_items")] == ["a", "c", "d"]


async def test_conversations_of_two_ids_do_not_mix(store: Store) -> None:
    await store.create_conversation(_record("conv_p", owner="p"))
    await store.create_conversation(_record("conv_q", owner="q"))
    await store.extend_conversation("conv_p", [{"id": "x"}])
    assert await store.conversation("conv_q") == []
    await store.delete_conversation("conv_q")
    assert (await store.get_conversation("conv_p")) is not None


async def test_untouched_conversations_expire(store_factory: StoreFactory, backend: str) -> None:
    if backend == "memory":
        pytest.skip("the memory store keeps conversations for the life of the process (bounded per conversation)")
    store = store_factory()
    await store.create_conversation(_record("conv_old"))
    await store.extend_conversation("conv_old", [{"id": "x"}])
    await store.expire(time.time() + RETENTION - 60)
    assert await store.get_conversation("conv_old") is not None
    await store.expire(time.time() + RETENTION + 60)
    assert await store.get_conversation("conv_old") is None
    assert await store.conversation("conv_old") == []


async def test_a_page_of_the_newest_or_oldest_items_is_read_as_such(store: Store) -> None:
    await store.create_conversation(_record("conv_page"))
    await store.extend_conversation("conv_page", [{"id": f"i{n}"} for n in range(10)])
    await store.delete_conversation_item("conv_page", "i8")  # a gap in the positions
    assert [i["id"] for i in await store.conversation("conv_page", newest=3)] == ["i6", "i7", "i9"]
    assert [i["id"] for i in await store.conversation("conv_page", oldest=2)] == ["i0", "i1"]
    assert len(await store.conversation("conv_page", newest=50)) == 9
    assert await store.conversation("conv_page", newest=0) == []
    assert len(await store.conversation("conv_page")) == 9


async def test_one_item_is_found_by_its_id(store: Store) -> None:
    await store.create_conversation(_record("conv_one"))
    await store.extend_conversation("conv_one", [{"id": f"i{n}", "type": "message", "n": n} for n in range(600)])
    assert await store.conversation_item("conv_one", "i599") == {"id": "i599", "type": "message", "n": 599}
    assert await store.conversation_item("conv_one", "i3") == {"id": "i3", "type": "message", "n": 3}
    assert await store.conversation_item("conv_one", "nope") is None
    assert await store.conversation_item("conv_other", "i3") is None
    assert await store.delete_conversation_item("conv_one", "i599") is True
    assert await store.conversation_item("conv_one", "i599") is None
    assert await store.delete_conversation_item("conv_one", "i599") is False
