"""The queue of deferred background work (``background_options.completion_window``), shared by every gateway instance
on one store: what waits, who has taken what, until when.

How this works: a :class:`QueuedWork` is one response to run later: its id, owner, the request body as the client
sent it (any instance re-validates and runs it), and its deadline (when its completion window ends). ``take`` hands
out the waiting item with the earliest deadline (earliest-deadline-first: every item can meet its window if any
order can) and leases it to the taking instance for ``lease_seconds``; the holder renews the lease while it runs the
item and calls ``done`` at the end. An item whose lease ran out (its instance died) is waiting again, so another
instance takes it over. ``take(..., due_by=T)`` only hands out items whose deadline is at or before ``T``: the
scheduler asks for those alone when interactive load leaves no room (responses/deferred.py).
``remove_waiting`` takes an item out only when nobody holds it (cancel while queued).

Implementations: :class:`MemoryDeferredQueue` here (one process), SQLite (store/deferred_sqlite.py) and Redis
(store/deferred_redis.py); ``open_deferred_queue`` (store/deferred_factory.py) picks one from a store URL.
All pass tests/deferred/.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

__all__ = ["DeferredQueue", "MemoryDeferredQueue", "QueueStats", "QueuedWork", "decode_work", "encode_work",
           "stats_of"]


class QueuedWork(msgspec.Struct, frozen=True):
    response_id: str
    owner: str | None
    body: dict[str, Any]  # the request as sent (validated again when it runs)
    window: str  # soonest | 2h | 8h
    enqueued_at: float  # unix seconds
    deadline: float  # unix seconds: the end of its completion window


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(QueuedWork)


def encode_work(work: QueuedWork) -> bytes:
    return _encoder.encode(work)


def decode_work(data: bytes | str) -> QueuedWork:
    return _decoder.decode(data)


@dataclass(slots=True)
class QueueStats:
    """``waiting``: items nobody holds; ``taken``: items an instance holds; ``oldest_wait``: seconds the
    longest-waiting unheld item has waited (0 when none); ``least_slack``: seconds to the nearest deadline of a
    waiting item (negative: past it; None when nothing waits)."""

    waiting: int = 0
    taken: int = 0
    oldest_wait: float = 0.0
    least_slack: float | None = None


class DeferredQueue(Protocol):
    async def put(self, work: QueuedWork) -> None: ...

    async def take(self, holder: str, lease_seconds: float, now: float, due_by: float | None = None
                   ) -> QueuedWork | None:
        """The waiting item with the earliest deadline (at or before ``due_by`` when given), leased to ``holder``."""
        ...

    async def renew(self, response_id: str, holder: str, lease_seconds: float, now: float) -> bool:
        """Extend ``holder``'s lease; False when it no longer holds it (the lease ran out, or the item is done)."""
        ...

    async def done(self, response_id: str) -> None: ...

    async def remove_waiting(self, response_id: str, now: float) -> bool:
        """Remove the item if it is queued and nobody holds it. True when it was removed."""
        ...

    async def stats(self, now: float) -> QueueStats: ...

    async def aclose(self) -> None: ...


def stats_of(rows: list[tuple[str, float, float, float]], now: float) -> QueueStats:
    """:class:`QueueStats` from ``(window, enqueued_at, deadline, lease_until)`` rows."""
    stats = QueueStats()
    for _window, enqueued_at, deadline, lease_until in rows:
        if lease_until > now:
            stats.taken += 1
            continue
        stats.waiting += 1
        stats.oldest_wait = max(stats.oldest_wait, now - enqueued_at)
        slack = deadline - now
        stats.least_slack = slack if stats.least_slack is None else min(stats.least_slack, slack)
    return stats


class MemoryDeferredQueue:
    """One process's queue (a ``memory`` store): nothing is shared or survives a restart."""

    def __init__(self) -> None:
        self._items: dict[str, QueuedWork] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._lock = asyncio.Lock()

    async def put(self, work: QueuedWork) -> None:
        self._items[work.response_id] = work

    async def take(self, holder: str, lease_seconds: float, now: float, due_by: float | None = None
                   ) -> QueuedWork | None:
        async with self._lock:
            waiting = [w for w in self._items.values()
                       if self._leases.get(w.response_id, ("", 0.0))[1] <= now
                       and (due_by is None or w.deadline <= due_by)]
            if not waiting:
                return None
            work = min(waiting, key=lambda w: (w.deadline, w.enqueued_at))
            self._leases[work.response_id] = (holder, now + lease_seconds)
            return work

    async def renew(self, response_id: str, holder: str, lease_seconds: float, now: float) -> bool:
        lease = self._leases.get(response_id)
        if response_id not in self._items or lease is None or lease[0] != holder or lease[1] <= now:
            return False
        self._leases[response_id] = (holder, now + lease_seconds)
        return True

    async def done(self, response_id: str) -> None:
        self._items.pop(response_id, None)
        self._leases.pop(response_id, None)

    async def remove_waiting(self, response_id: str, now: float) -> bool:
        if response_id not in self._items or self._leases.get(response_id, ("", 0.0))[1] > now:
            return False
        await self.done(response_id)
        return True

    async def stats(self, now: float) -> QueueStats:
        return stats_of([(w.window, w.enqueued_at, w.deadline, self._leases.get(w.response_id, ("", 0.0))[1])
                         for w in self._items.values()], now)

    async def aclose(self) -> None:
        return None
