"""Leases and recovery (stores shared between processes: sqlite, redis): a lost generator never hangs a reader."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from store_helpers import LEASE, StoreFactory, collect, entries, new_record, write_log

from respstream.server.store.base import LogEntry, SequenceConflict

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "redis", "redis-cluster"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _codes(log: list[LogEntry]) -> list[tuple[str, str | None]]:
    out = []
    for entry in log:
        data = orjson.loads(entry.data)
        code = data.get("code") or (data.get("error") or {}).get("code")
        out.append((data["type"], code))
    return out


@pytest.mark.parametrize("dialect", ["platform", "openai"])
async def test_expired_lease_ends_the_log_once_with_worker_lost(store_factory: StoreFactory, dialect: str) -> None:
    doomed, observer = store_factory(instance_id="doomed"), store_factory(instance_id="observer")
    record = new_record(dialect=dialect, instance_id="doomed")
    await doomed.create(record)
    lease = doomed.hold_lease(record.id)
    await lease.__aenter__()
    await doomed.append(record.id, entries(0, 5))
    await doomed.aclose()  # the instance "dies": its renewals fail from now on, the lease runs out
    started = time.monotonic()
    logs = await asyncio.gather(*(collect(observer.tail(record.id, after=n)) for n in (-1, -1, 2, 4)))
    waited = time.monotonic() - started
    await lease.__aexit__(None, None, None)

    expected_tail = [("error", "worker_lost")] if dialect == "platform" else [
        ("error", "worker_lost"), ("response.failed", None)]
    full = logs[0]
    assert [e.sequence_number for e in full] == list(range(5 + len(expected_tail)))
    assert _codes(full[5:]) == expected_tail
    assert [e.terminal for e in full[5:]] == [False] * (len(expected_tail) - 1) + [True]
    assert logs[1] == full and logs[2] == full[3:] and logs[3] == full[5:]
    assert waited < LEASE * 2 + 2.0
    again = await observer.get(record.id)
    assert again is not None and again.status == "failed"
    assert again.response["error"]["code"] == "worker_lost"
    if dialect == "openai":
        failed = orjson.loads(full[-1].data)
        assert failed["response"]["status"] == "failed" and failed["response"]["id"] == record.id


async def test_renewed_lease_keeps_the_log_open(store_factory: StoreFactory) -> None:
    writer, observer = store_factory(instance_id="w"), store_factory(instance_id="o")
    record = new_record(instance_id="w")
    await writer.create(record)
    async with writer.hold_lease(record.id):
        await writer.append(record.id, entries(0, 2))
        reader = asyncio.create_task(collect(observer.tail(record.id)))
        await asyncio.sleep(LEASE * 2.5)  # the lease runs out 2.5 times over unless renewed
        assert not reader.done()
        await writer.append(record.id, entries(2, 4, last_terminal=True))
    got = await asyncio.wait_for(reader, 5)
    assert [e.sequence_number for e in got] == [0, 1, 2, 3]
    assert got[-1].type == "response.completed"


async def test_released_lease_without_terminal_ends_the_log(store_factory: StoreFactory) -> None:
    writer, observer = store_factory(instance_id="w"), store_factory(instance_id="o")
    record = new_record(instance_id="w")
    await writer.create(record)
    with pytest.raises(RuntimeError):
        async with writer.hold_lease(record.id):
            await writer.append(record.id, entries(0, 3))
            raise RuntimeError("the runner crashed before its terminal")
    got = await asyncio.wait_for(collect(observer.tail(record.id)), LEASE * 2 + 2)
    assert _codes(got[3:]) == [("error", "worker_lost")] and got[-1].sequence_number == 3


async def test_writer_that_lost_its_lease_cannot_append_after_worker_lost(store_factory: StoreFactory) -> None:
    slow, observer = store_factory(instance_id="slow"), store_factory(instance_id="o")
    record = new_record(instance_id="slow")
    await slow.create(record)
    async with slow.hold_lease(record.id):
        await slow.append(record.id, entries(0, 2))
    await asyncio.wait_for(collect(observer.tail(record.id)), LEASE * 2 + 2)  # ends it with worker_lost
    with pytest.raises(SequenceConflict, match="already ended"):  # not "a duplicate": someone else ended it
        await slow.append(record.id, entries(2, 3, last_terminal=True))
    assert [e.terminal for e in await observer.read(record.id)] == [False, False, True]


async def test_recover_ends_only_this_instances_unfinished_logs(store_factory: StoreFactory) -> None:
    store = store_factory(instance_id="restarted")
    mine, finished, other = new_record(instance_id="a"), new_record(instance_id="a"), new_record(instance_id="b")
    for record in (mine, finished, other):
        await store.create(record)
        await store.append(record.id, entries(0, 4))
    await store.append(finished.id, entries(4, 5, last_terminal=True))
    assert await store.recover("a") == 1
    assert _codes((await store.read(mine.id))[4:]) == [("error", "worker_lost")]
    assert (await store.read(finished.id))[-1].type == "response.completed"
    assert not any(e.terminal for e in await store.read(other.id))
    recovered = await store.get(mine.id)
    assert recovered is not None and recovered.status == "failed"
    assert await store.recover("a") == 0  # idempotent


async def test_expire_ends_lost_logs_nobody_is_reading(store_factory: StoreFactory) -> None:
    doomed, janitor = store_factory(instance_id="doomed"), store_factory(instance_id="janitor")
    record = new_record(instance_id="doomed")
    await doomed.create(record)
    lease = doomed.hold_lease(record.id)
    await lease.__aenter__()
    await write_log(doomed, record.id, 3, 3)  # finished: the expired lease must not add a second terminal
    other = new_record(instance_id="doomed")
    await doomed.create(other)
    async with doomed.hold_lease(other.id):
        await doomed.append(other.id, entries(0, 1))
    await doomed.aclose()
    await lease.__aexit__(None, None, None)
    assert await janitor.expire(time.time() + LEASE + 1) == 0  # nothing is past retention
    assert [e.type for e in await janitor.read(record.id)][-1] == "response.completed"
    assert len(await janitor.read(record.id)) == 3
    assert _codes((await janitor.read(other.id))[1:]) == [("error", "worker_lost")]
