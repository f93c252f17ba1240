"""The in-process store: event logs and records in dicts, live readers woken once per appended batch.

How this works: each response has a ``_Log`` (a list of entries whose index equals the sequence number, because the
writer numbers from 0 by +1) and an ``asyncio.Event`` that is set and replaced on every append, so every reader
waiting on it wakes once per batch, not once per event. ``tail`` reads what exists, then waits for the next wakeup.
Finished responses are kept for ``retention_seconds`` and at most ``max_responses`` of them (oldest finished first).

Besides the ``Store`` interface it offers ``wait_beyond(id, after)``, the fast path the gateway's SSE sender uses to
wait with a keep-alive timeout without tearing down an async generator.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from respstream.server.store.base import LogEntry, ResponseRecord, SequenceConflict

__all__ = ["MemoryStore"]

_FINISHED = frozenset({"completed", "incomplete", "failed", "cancelled"})


@dataclass(slots=True)
class _Log:
    entries: list[LogEntry] = field(default_factory=list)
    ended: bool = False  # terminal entry appended, or the response was deleted
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: bool = False  # a reader waits on `wakeup` (no reader: no Event churn per append)

    def wake(self) -> None:
        if self.waiting:
            self.waiting = False
            self.wakeup.set()
            self.wakeup = asyncio.Event()


class MemoryStore:
    """One process, nothing survives a restart. Bounded by ``retention_seconds`` and ``max_responses``."""

    def __init__(self, *, retention_seconds: float = 24 * 3600, max_responses: int = 10_000, history_limit: int = 1000):
        self._records: OrderedDict[str, ResponseRecord] = OrderedDict()
        self._logs: dict[str, _Log] = {}
        self._conversations: dict[str, list[dict[str, Any]]] = {}
        self._retention = retention_seconds
        self._max_responses = max_responses
        self._history_limit = history_limit

    # -- records ---------------------------------------------------------------------------------------------------
    async def create(self, record: ResponseRecord) -> None:
        self._evict(room=1)
        self._records[record.id] = replace(record)
        self._logs[record.id] = _Log()

    def has(self, response_id: str) -> bool:
        """True when this store holds ``response_id`` (no copy, no await: the split store's routing test)."""
        return response_id in self._records

    async def get(self, response_id: str) -> ResponseRecord | None:
        record = self._records.get(response_id)
        return None if record is None else replace(record)

    async def update(self, record: ResponseRecord) -> None:
        if record.id in self._records:
            self._records[record.id] = replace(record)

    async def delete(self, response_id: str) -> bool:
        found = self._records.pop(response_id, None) is not None
        log = self._logs.pop(response_id, None)
        if log is not None:
            log.ended = True
            log.waiting = True
            log.wake()
        return found

    # -- the log ---------------------------------------------------------------------------------------------------
    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        self.append_nowait(response_id, entries)

    def append_nowait(self, response_id: str, entries: list[LogEntry]) -> None:
        """:meth:`append` without a coroutine (the writer's per-batch fast path). Same errors."""
        log = self._logs.get(response_id)
        if log is None:
            raise KeyError(response_id)
        if not entries:
            return
        if log.ended or entries[0].sequence_number != len(log.entries):
            raise SequenceConflict(
                f"{response_id}: append at {entries[0].sequence_number}, log has {len(log.entries)} entries"
                + (" and has ended" if log.ended else "")
            )
        log.entries.extend(entries)
        if entries[-1].terminal:
            log.ended = True
        log.wake()

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        log = self._logs.get(response_id)
        if log is None:
            return []
        start = max(after + 1, 0)
        return log.entries[start:] if limit is None else log.entries[start : start + limit]

    async def wait_beyond(self, response_id: str, after: int) -> None:
        """Return once the log holds an entry after ``after``, has ended, or is gone. Cancel-safe."""
        log = self._logs.get(response_id)
        while log is not None and len(log.entries) <= after + 1 and not log.ended:
            log.waiting = True
            await log.wakeup.wait()
            log = self._logs.get(response_id)

    def is_ended(self, response_id: str) -> bool:
        log = self._logs.get(response_id)
        return log is None or log.ended

    async def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        while True:
            batch = await self.read(response_id, after)
            for entry in batch:
                yield entry
                after = entry.sequence_number
                if entry.terminal:
                    return
            if self.is_ended(response_id):
                # Deleted (or ended) while we read: anything left was delivered above.
                if not await self.read(response_id, after):
                    return
                continue
            await self.wait_beyond(response_id, after)

    # -- conversations ---------------------------------------------------------------------------------------------
    async def conversation(self, conversation_id: str) -> list[dict[str, Any]]:
        return list(self._conversations.get(conversation_id, []))

    async def extend_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        history = self._conversations.setdefault(conversation_id, [])
        history.extend(items)
        if len(history) > self._history_limit:
            del history[: len(history) - self._history_limit]

    def hold_lease(self, response_id: str) -> AbstractAsyncContextManager[None]:
        # One process: the generator and every reader die together, so there is nothing to lease.
        return nullcontext()

    async def recover(self, instance_id: str) -> int:
        return 0  # nothing survives a restart

    async def expire(self, now: float | None = None) -> int:
        before = len(self._records)
        self._evict(time.time() if now is None else now)
        return before - len(self._records)

    async def aclose(self) -> None:
        for log in self._logs.values():
            log.waiting = True
            log.wake()

    # -- retention -------------------------------------------------------------------------------------------------
    def _evict(self, now: float | None = None, room: int = 0) -> None:
        """Drop finished responses past retention, and the oldest finished ones past ``max_responses``.

        Walks from the oldest and stops at the first finished response it keeps, so the usual call (nothing to drop)
        costs one look, not a copy of every retained id."""
        now = time.time() if now is None else now
        over = len(self._records) - self._max_responses + room
        victims: list[str] = []
        for response_id, record in self._records.items():
            if record.status not in _FINISHED:
                continue
            if over > 0 or now - record.created_at > self._retention:
                victims.append(response_id)
                over -= 1
            else:
                break
        for response_id in victims:
            del self._records[response_id]
            self._logs.pop(response_id, None)
