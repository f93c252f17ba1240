"""A page after a cursor is read from the cursor on, in every store (issue 42, M5): the contract of
:func:`~respstream.server.store.conversation_seek.conversation_after`."""

from __future__ import annotations

import pytest
from store_helpers import StoreFactory

from respstream.server.store.base import Store
from respstream.server.store.conversation_seek import conversation_after

pytestmark = pytest.mark.timeout(60)


def _ids(items: list[dict[str, object]] | None) -> list[object] | None:
    return None if items is None else [item["id"] for item in items]


async def test_the_cursor_and_count_items_past_it_either_way(store: Store) -> None:
    await store.extend_conversation("conv_s", [{"id": f"i{n}", "n": n} for n in range(10)])
    assert _ids(await conversation_after(store, "conv_s", "i3", count=2, newer=True)) == ["i3", "i4", "i5"]
    assert _ids(await conversation_after(store, "conv_s", "i3", count=2, newer=False)) == ["i1", "i2", "i3"]
    assert _ids(await conversation_after(store, "conv_s", "i8", count=5, newer=True)) == ["i8", "i9"]
    assert _ids(await conversation_after(store, "conv_s", "i1", count=5, newer=False)) == ["i0", "i1"]
    assert _ids(await conversation_after(store, "conv_s", "i0", count=0, newer=True)) == ["i0"]
    assert await conversation_after(store, "conv_s", "nope", count=2, newer=True) is None
    assert await conversation_after(store, "conv_none", "i1", count=2, newer=False) is None


async def test_the_seek_follows_deletes_and_later_items(store: Store) -> None:
    await store.extend_conversation("conv_d", [{"id": f"i{n}"} for n in range(6)])
    assert await store.delete_conversation_item("conv_d", "i2") is True
    await store.extend_conversation("conv_d", [{"id": "i6"}, {"id": "i7"}])
    assert _ids(await conversation_after(store, "conv_d", "i1", count=3, newer=True)) == ["i1", "i3", "i4", "i5"]
    assert _ids(await conversation_after(store, "conv_d", "i6", count=3, newer=False)) == ["i3", "i4", "i5", "i6"]
    assert await conversation_after(store, "conv_d", "i2", count=1, newer=True) is None
    assert await store.delete_conversation("conv_d") is False  # items only, no object: still gone after
    assert await conversation_after(store, "conv_d", "i1", count=1, newer=True) is None


async def test_the_seek_follows_the_sliding_window(store_factory: StoreFactory, backend: str) -> None:
    if backend == "memory":
        pytest.skip("the memory store's window is its own constructor argument, tested with it")
    store = store_factory(history_limit=4)
    await store.extend_conversation("conv_w", [{"id": f"i{n}"} for n in range(3)])
    await store.extend_conversation("conv_w", [{"id": f"i{n}"} for n in range(3, 7)])
    assert _ids(await store.conversation("conv_w")) == ["i3", "i4", "i5", "i6"]
    assert await conversation_after(store, "conv_w", "i2", count=1, newer=True) is None
    assert _ids(await conversation_after(store, "conv_w", "i4", count=1, newer=True)) == ["i4", "i5"]
    assert _ids(await conversation_after(store, "conv_w", "i4", count=9, newer=False)) == ["i3", "i4"]


async def test_a_redis_conversation_without_the_ids_list_is_scanned(store: Store, backend: str) -> None:
    """Items pushed before the ids list was kept beside them (an older gateway): found by a scan, never wrongly."""
    if not backend.startswith("redis"):
        pytest.skip("the ids list is the Redis store's")
    import msgspec

    from respstream.server.store.redis import RedisStore

    assert isinstance(store, RedisStore)
    raw, key = store._r, store.k.conversation("conv_old")
    await raw.rpush(key, *[msgspec.json.encode({"id": f"i{n}"}) for n in range(5)])  # as an older gateway did
    await store.extend_conversation("conv_old", [{"id": "i5"}])  # the ids list now holds only the new item
    assert _ids(await conversation_after(store, "conv_old", "i2", count=2, newer=True)) == ["i2", "i3", "i4"]
    assert (await store.conversation_item("conv_old", "i1")) == {"id": "i1"}
    assert await store.delete_conversation_item("conv_old", "i3") is True
    assert _ids(await conversation_after(store, "conv_old", "i5", count=9, newer=False)) == ["i0", "i1", "i2", "i4",
                                                                                               "i5"]
