"""The deferred-work queue, the same checks on every implementation: in memory, SQLite and a real redis-server.

Earliest deadline first; ``due_by`` hands out only urgent items; a taken item is hidden from other instances while
its lease lasts and taken over once it runs out; only the holder renews; cancel removes only a waiting item; stats.
Times are passed in (``now``) except on Redis, whose scripts read Redis's own clock: there the lease is real time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from respstream.server.store.deferred_factory import open_deferred_queue
from respstream.server.store.deferred_queue import DeferredQueue, MemoryDeferredQueue, QueuedWork


def _work(rid: str, deadline: float, enqueued: float = 0.0, window: str = "2h") -> QueuedWork:
    return QueuedWork(response_id=rid, owner="k1", body={"input": rid, "background": True}, window=window,
                      enqueued_at=enqueued, deadline=deadline)


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def queue(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DeferredQueue]:
    if request.param == "memory":
        made: DeferredQueue = MemoryDeferredQueue()
    elif request.param == "sqlite":
        made = open_deferred_queue(f"sqlite:///{tmp_path / 'queue.db'}")
    else:
        request.applymarker(pytest.mark.redis)
        server = request.getfixturevalue("redis_server")
        made = open_deferred_queue(server.url)
        # A fresh prefix per test: the session's redis-server is shared.
        from respstream.server.store.deferred_redis import RedisDeferredQueue

        assert isinstance(made, RedisDeferredQueue)
        await made.aclose()
        made = RedisDeferredQueue(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        yield made
    finally:
        await made.aclose()


async def test_earliest_deadline_first_and_due_by(queue: DeferredQueue) -> None:
    now = time.time()
    await queue.put(_work("late", now + 8 * 3600, now))
    await queue.put(_work("soon", now + 900, now + 1, "soonest"))
    await queue.put(_work("mid", now + 7200, now + 2))
    # Under interactive load only what is due within the urgent margin is handed out.
    assert await queue.take("a", 30, now, due_by=now + 600) is None
    first = await queue.take("a", 30, now, due_by=now + 1000)
    assert first is not None and first.response_id == "soon" and first.body == {"input": "soon", "background": True}
    second = await queue.take("a", 30, now)
    third = await queue.take("a", 30, now)
    assert [w.response_id for w in (second, third) if w] == ["mid", "late"]
    assert await queue.take("a", 30, now) is None  # all three are held


async def test_a_held_item_is_hidden_until_its_lease_runs_out_then_taken_over(queue: DeferredQueue) -> None:
    now = time.time()
    await queue.put(_work("r1", now + 100, now))
    lease = 0.6
    assert (await queue.take("dead", lease, now)) is not None
    assert await queue.take("alive", lease, now) is None
    stats = await queue.stats(now)
    assert (stats.waiting, stats.taken) == (0, 1)
    assert await queue.remove_waiting("r1", now) is False  # held: a cancel goes through the running response
    await asyncio.sleep(lease + 0.3)  # (Redis keeps real time; the others are told the time below)
    later = now + lease + 0.3
    assert await queue.renew("r1", "dead", lease, later) is False  # its lease ran out
    taken = await queue.take("alive", 30, later)
    assert taken is not None and taken.response_id == "r1"
    assert await queue.renew("r1", "alive", 30, later) is True
    assert await queue.renew("r1", "dead", 30, later) is False
    await queue.done("r1")
    assert await queue.take("alive", 30, later) is None
    assert (await queue.stats(later)).taken == 0


async def test_cancel_while_waiting_and_stats(queue: DeferredQueue) -> None:
    now = time.time()
    await queue.put(_work("old", now + 7200, now - 50))
    await queue.put(_work("new", now + 300, now - 5))
    stats = await queue.stats(now)
    assert stats.waiting == 2 and stats.taken == 0
    assert 45 < stats.oldest_wait < 60
    assert stats.least_slack is not None and 250 < stats.least_slack <= 300
    assert await queue.remove_waiting("old", now) is True
    assert await queue.remove_waiting("old", now) is False
    stats = await queue.stats(now)
    assert stats.waiting == 1 and 0 < stats.oldest_wait < 15
    await queue.done("new")
    empty = await queue.stats(now)
    assert (empty.waiting, empty.taken, empty.oldest_wait, empty.least_slack) == (0, 0, 0.0, None)
