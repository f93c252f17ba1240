"""The one suite every store passes: memory, sqlite and redis (DESIGN §4 "Stores")."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from store_helpers import RETENTION, StoreFactory, collect, entries, event, new_record, write_log

from respstream.server.store.base import LogEntry, SequenceConflict, SequenceGap, Store

pytestmark = pytest.mark.timeout(60)


async def test_create_get_update_delete(store: Store) -> None:
    record = new_record()
    assert await store.get(record.id) is None
    await store.create(record)
    got = await store.get(record.id)
    assert got == record
    record.status = "completed"
    record.response["status"] = "completed"
    await store.update(record)
    got = await store.get(record.id)
    assert got is not None and got.status == "completed" and got.response["status"] == "completed"
    assert await store.delete(record.id) is True
    assert await store.get(record.id) is None
    assert await store.read(record.id) == []
    assert await store.delete(record.id) is False


async def test_update_of_deleted_record_is_a_noop(store: Store) -> None:
    record = new_record()
    await store.update(record)
    assert await store.get(record.id) is None


async def test_append_then_read_after_n(store: Store) -> None:
    record = new_record()
    await store.create(record)
    log = entries(0, 10, last_terminal=True)
    await store.append(record.id, log[:1])
    await store.append(record.id, log[1:])
    assert await store.read(record.id) == log
    for n in range(-1, 10):
        assert await store.read(record.id, after=n) == log[n + 1 :], f"after={n}"
    assert await store.read(record.id, after=2, limit=3) == log[3:6]
    assert [orjson.loads(e.data)["sequence_number"] for e in await store.read(record.id)] == list(range(10))


async def test_duplicate_or_late_append_is_refused_whole(store: Store) -> None:
    record = new_record()
    await store.create(record)
    await store.append(record.id, entries(0, 5))
    other_4 = LogEntry(4, "response.output_text.delta", b'{"other":4}')
    with pytest.raises(SequenceConflict):
        await store.append(record.id, [other_4, *entries(5, 7)])  # a different event at the taken seq 4
    assert [e.sequence_number for e in await store.read(record.id)] == [0, 1, 2, 3, 4]
    await store.append(record.id, [event(5, terminal=True)])
    with pytest.raises(SequenceConflict):
        await store.append(record.id, [event(6)])  # after the terminal
    assert (await store.read(record.id))[-1].terminal


async def test_an_append_that_would_leave_a_gap_is_refused_whole(store: Store) -> None:
    """Issue 16: the first new entry must be the log's next sequence number; anything after a hole is refused with
    SequenceGap naming the log's next number, nothing written, and the log goes on from where it really ends."""
    record = new_record()
    await store.create(record)
    await store.append(record.id, entries(0, 5))
    with pytest.raises(SequenceGap) as refused:
        await store.append(record.id, entries(7, 9))
    # The message says where the append started and where the log really ends (as its last or its next number).
    message = str(refused.value).replace(record.id, "<id>")
    assert refused.value.log_next == 5 and "7" in message and ("4" in message or "5" in message), message
    assert [e.sequence_number for e in await store.read(record.id)] == [0, 1, 2, 3, 4]
    await store.append(record.id, entries(5, 8, last_terminal=True))
    assert await store.read(record.id) == entries(0, 8, last_terminal=True)


async def test_a_retried_append_whose_first_attempt_landed_is_recognised(store: Store) -> None:
    """Issue 13 item 7: the retry of a batch that landed (its answer lost in a stall) is not a SequenceConflict,
    including a retry that carries newer entries after it, and one ending with the terminal."""
    record = new_record()
    await store.create(record)
    await store.append(record.id, entries(0, 5))
    await store.append(record.id, entries(3, 5))  # the same batch tail again: already there
    await store.append(record.id, entries(3, 8))  # landed part + new entries
    await store.append(record.id, entries(8, 10, last_terminal=True))
    await store.append(record.id, entries(8, 10, last_terminal=True))  # the terminal batch retried
    log = await store.read(record.id)
    assert [e.sequence_number for e in log] == list(range(10)) and log == entries(0, 10, last_terminal=True)


async def test_append_to_unknown_response_raises_key_error(store: Store) -> None:
    with pytest.raises(KeyError):
        await store.append("no-such-response", entries(0, 1))


async def test_tail_live_sees_everything_once_in_order(store: Store) -> None:
    record = new_record()
    await store.create(record)
    readers = [asyncio.create_task(collect(store.tail(record.id))) for _ in range(3)]
    await asyncio.sleep(0)  # let the readers start waiting on an empty log
    await write_log(store, record.id, 200, 7)
    for got in await asyncio.gather(*readers):
        assert [e.sequence_number for e in got] == list(range(200))
        assert got[-1].terminal and not any(e.terminal for e in got[:-1])


async def test_tail_after_finish_replays_and_ends(store: Store) -> None:
    record = new_record()
    await store.create(record)
    await write_log(store, record.id, 20, 20)
    assert [e.sequence_number for e in await collect(store.tail(record.id, after=4))] == list(range(5, 20))
    assert await collect(store.tail(record.id, after=19)) == []  # at the terminal: nothing, and no hang
    assert await collect(store.tail(record.id, after=50)) == []


async def test_tail_of_unknown_response_ends_at_once(store: Store) -> None:
    assert await collect(store.tail("no-such-response")) == []


async def test_tail_ends_when_the_response_is_deleted(store: Store) -> None:
    record = new_record()
    await store.create(record)
    await store.append(record.id, entries(0, 3))
    seen: list[int] = []

    async def reader() -> None:
        async for entry in store.tail(record.id):
            seen.append(entry.sequence_number)

    task = asyncio.create_task(reader())
    for _ in range(200):  # bounded: wait until the reader has caught up, then delete under it
        if len(seen) == 3:
            break
        await asyncio.sleep(0.005)
    assert await store.delete(record.id)
    await asyncio.wait_for(task, timeout=5)
    assert seen == [0, 1, 2]


async def test_conversations_keep_order(store: Store) -> None:
    assert await store.conversation("conv-x") == []
    await store.extend_conversation("conv-x", [{"role": "user", "content": "a"}])
    await store.extend_conversation("conv-x", [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}])
    await store.extend_conversation("conv-y", [{"role": "user", "content": "other"}])
    assert [i["content"] for i in await store.conversation("conv-x")] == ["a", "b", "c"]
    assert await store.conversation("conv-y") == [{"role": "user", "content": "other"}]


async def test_conversation_history_is_a_sliding_window(store_factory: StoreFactory) -> None:
    store = store_factory(history_limit=3)
    for n in range(5):
        await store.extend_conversation("conv-w", [{"n": n}])
    await store.extend_conversation("conv-w", [{"n": 5}, {"n": 6}])
    assert [i["n"] for i in await store.conversation("conv-w")] == [4, 5, 6]


async def test_retention_expiry_deletes_old_finished_responses(store: Store) -> None:
    now = time.time()
    old = new_record(created_at=now - 100, status="completed")
    fresh = new_record(created_at=now, status="completed")
    for record in (old, fresh):
        await store.create(record)
        await write_log(store, record.id, 3, 3)
    assert await store.expire(now + RETENTION - 50) == 1  # `old` is past retention then, `fresh` is not
    assert await store.get(old.id) is None
    assert await store.read(old.id) == []
    assert await collect(store.tail(old.id)) == []
    assert await store.get(fresh.id) is not None
    assert len(await store.read(fresh.id)) == 3


@pytest.mark.parametrize("phase", ["while-generating", "after-finish"])
async def test_resume_on_another_instance_from_every_point(store_factory: StoreFactory, phase: str) -> None:
    # The writer's lease is long: this test is about resuming, not lease expiry. With the suite's short LEASE
    # (0.6 s), a process stalled for 0.4 s on a loaded machine (301 tails polling beside the writer) let the lease
    # lapse; a reader then ended the log with worker_lost, as it should, and the writer got SequenceConflict.
    writer_store = store_factory(instance_id="writer", lease_seconds=60.0)
    reader_store = store_factory(instance_id="reader")
    record = new_record(instance_id="writer")
    await writer_store.create(record)
    total = 300

    async def generate() -> None:
        async with writer_store.hold_lease(record.id):
            await write_log(writer_store, record.id, total, 20, pause=0.002)

    writer = asyncio.create_task(generate())
    if phase == "after-finish":
        await writer
    else:
        assert not writer.done()
    resumed = await asyncio.gather(*(collect(reader_store.tail(record.id, after=n)) for n in range(-1, total)))
    await writer
    full = await reader_store.read(record.id)
    assert [e.sequence_number for e in full] == list(range(total))
    for n, tail in zip(range(-1, total), resumed, strict=True):
        assert full[: n + 1] + tail == full, f"starting_after={n}"
