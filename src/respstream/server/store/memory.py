"""The in-process store: event logs and records in dicts, live readers woken once per appended batch.

How this works: each response has a ``_Log`` (a list of entries whose index equals the sequence number, because the
writer numbers from 0 by +1) and a list of waiting readers' futures, all resolved (and the list emptied) on every
append, so every reader waiting wakes once per batch, not once per event. ``tail`` reads what exists, then waits for
the next wakeup. Finished responses are kept for ``retention_seconds``, at most ``max_responses`` of them and at most
``max_bytes`` of stored data (the request context, the Response snapshot, the log's event bytes, the conversations'
items), the oldest finished first. A count alone let 10,000 responses of 1 MiB each take ~10 GB. When running
responses alone fill the byte budget, ``create`` raises ``StoreUnavailable`` (the gateway answers 503 with
Retry-After) instead of growing; :meth:`MemoryStore.check_room` asks the same question before the work that
precedes ``create`` (fetching files).

Bytes are what the objects really take (issue 42, H4v: counting JSON length charged a record of 30,000 tiny input
items 4.3 MB while it held 17.4 MB): a record's request and its Response snapshot (as of the last create or update)
are kept as compact JSON bytes (store/memory_records.py), so their charge is exact, and decoded by :meth:`get`;
each record and log entry adds its calibrated overhead. (Measuring the writer's live Response object by object took
~20% of a short streaming request's instructions: issue 41.)

Text deltas may be appended as :class:`~respstream.server.store.base.DeltaEntry` (the delta and its part's
template, ~90 bytes instead of ~270): :meth:`MemoryStore.read` hands every other reader real ``LogEntry`` objects;
the gateway's SSE sender takes the compact ones (:meth:`MemoryStore.read_entries`) and formats each frame in one step.

Besides the ``Store`` interface it offers ``waiter(id, after)`` (a future resolved by the next append, which the SSE
sender's own keep-alive timer may resolve first: no ``asyncio.timeout`` per wait), ``wait_beyond(id, after)``, and
``listen(id, after, fn)``: ``fn()`` called inside every append, so a caught-up SSE reader sends the new frames
without its task waking (server/http/direct_send.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from respstream.server.store.base import (
    ConversationRecord,
    Entry,
    LogEntry,
    ResponseRecord,
    SequenceConflict,
    SequenceGap,
    StoreUnavailable,
)
from respstream.server.store.memory_conversations import MemoryConversations, item_bytes
from respstream.server.store.memory_records import APART, encoded, entry_bytes, kept
from respstream.server.store.object_size import DICT_ENTRY_BYTES

__all__ = ["MemoryStore"]

_FINISHED = frozenset({"completed", "incomplete", "failed", "cancelled"})
DEFAULT_MAX_BYTES = 256 << 20


def _record_bytes(record: ResponseRecord, request: bytes, response: bytes) -> int:
    """What a record kept as (``request`` and ``response`` encoded) takes: their bytes, the record and its (still
    empty) log with their dict slots."""
    return _RECORD_OVERHEAD + sys.getsizeof(record.id) + sys.getsizeof(request) + sys.getsizeof(response)


@dataclass(slots=True)
class _Log:
    entries: list[Entry] = field(default_factory=list)
    size: int = 0  # bytes of the entries (see memory_records.entry_bytes)
    ended: bool = False  # terminal entry appended, or the response was deleted
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    listeners: list[Callable[[], None]] = field(default_factory=list)  # called on every append (see listen())

    def wake(self) -> None:
        for listener in self.listeners:
            listener()
        if self.waiters:
            waiters, self.waiters = self.waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)


# The record object, its log (with its three lists) and its slots in the store's five dicts.
_RECORD_OVERHEAD = (sys.getsizeof(ResponseRecord(id="", status="", created_at=0.0)) + sys.getsizeof(_Log())
                    + 3 * sys.getsizeof([]) + 5 * DICT_ENTRY_BYTES + sys.getsizeof(0))


class MemoryStore:
    """One process, nothing survives a restart. Bounded by ``retention_seconds``, ``max_responses`` and
    ``max_bytes``."""

    # The request is kept encoded at create and :meth:`update` never reads it: the caller may drop its own copy.
    # (So is the Response: a change to the caller's dict is stored by the next update.)
    keeps_request_apart = True

    def __init__(self, *, retention_seconds: float = 24 * 3600, max_responses: int = 10_000, history_limit: int = 1000,
                 max_bytes: int = DEFAULT_MAX_BYTES):
        self._records: OrderedDict[str, ResponseRecord] = OrderedDict()
        self._record_sizes: dict[str, int] = {}
        self._requests: dict[str, bytes] = {}  # each record's request, encoded (see the module's docstring)
        self._responses: dict[str, bytes] = {}  # each record's Response snapshot, encoded
        self._max_bytes = max_bytes
        self.bytes = 0  # stored bytes now (records + logs), for metrics and tests
        self._logs: dict[str, _Log] = {}
        self._conversations = MemoryConversations(history_limit)
        self._conversation_objects: dict[str, ConversationRecord] = {}
        self._retention = retention_seconds
        self._max_responses = max_responses

    # -- records ---------------------------------------------------------------------------------------------------
    def check_room(self, record: ResponseRecord) -> None:
        """Raise ``StoreUnavailable`` now when :meth:`create` would (finished responses are dropped to make room)."""
        self._room_for(self._measure(record)[2])

    @staticmethod
    def _measure(record: ResponseRecord) -> tuple[bytes, bytes, int]:
        """The record's request and Response as this store keeps them, and the size it is charged."""
        request, response = encoded(record.request), encoded(record.response)
        return request, response, _record_bytes(record, request, response)

    def _room_for(self, size: int) -> None:
        self._evict(room=1, room_bytes=size)
        if self.bytes + size > self._max_bytes:
            raise StoreUnavailable(
                f"the memory store is full ({self.bytes} of max {self._max_bytes} bytes held by running responses; "
                f"a new one needs {size}; setting memory_store_max_bytes)"
            )

    async def create(self, record: ResponseRecord) -> None:
        request, response, size = self._measure(record)
        self._room_for(size)
        self._store(record, request, response, size)

    def _store(self, record: ResponseRecord, request: bytes, response: bytes, size: int) -> None:
        self._records[record.id] = kept(record)
        self._requests[record.id] = request
        self._responses[record.id] = response
        self._record_sizes[record.id] = size
        self.bytes += size
        self._logs[record.id] = _Log()

    def has(self, response_id: str) -> bool:
        """True when this store holds ``response_id`` (no copy, no await: the split store's routing test)."""
        return response_id in self._records

    async def get(self, response_id: str) -> ResponseRecord | None:
        record = self._records.get(response_id)
        if record is None:
            return None
        return replace(record, request=msgspec.json.decode(self._requests[response_id]),
                       response=msgspec.json.decode(self._responses[response_id]))

    async def update(self, record: ResponseRecord) -> None:
        """Store the record's new status and Response; its request is the one it was created with, plus the keys the
        caller's copy sets (a running response's copy is emptied at create: see ``keeps_request_apart``)."""
        self._update(record, None)

    async def update_encoded(self, record: ResponseRecord, response: bytes) -> None:
        """:meth:`update` with ``record.response`` already encoded as this store keeps it (compact JSON in a bytes
        object of exactly its size), so it is not encoded a second time: the writer hands over the Response its
        terminal event's bytes already hold (server/events/writer_store.py; issue 41)."""
        self._update(record, response)

    def _update(self, record: ResponseRecord, response: bytes | None) -> None:
        request = self._requests.get(record.id)
        if request is not None:
            if record.request and record.request is not APART:
                # The caller's copy holds what changed after create (a compaction's request["context"], which the
                # next turn of a previous_response_id chain starts from; or a whole request read back by get()).
                request = encoded({**msgspec.json.decode(request), **record.request})
                self._requests[record.id] = request
            self._records[record.id] = kept(record)
            if response is None:
                response = encoded(record.response)
            self._responses[record.id] = response
            size = _record_bytes(record, request, response)
            self.bytes += size - self._record_sizes.get(record.id, 0)
            self._record_sizes[record.id] = size
            if self.bytes > self._max_bytes:
                self._evict()

    async def delete(self, response_id: str) -> bool:
        found = self._records.pop(response_id, None) is not None
        self._forget(response_id)
        return found

    def _forget(self, response_id: str) -> None:
        """Drop the log and the byte count of a response whose record is gone; readers see the end."""
        self.bytes -= self._record_sizes.pop(response_id, 0)
        self._requests.pop(response_id, None)
        self._responses.pop(response_id, None)
        log = self._logs.pop(response_id, None)
        if log is not None:
            self.bytes -= log.size
            log.ended = True
            log.wake()

    # -- the log ---------------------------------------------------------------------------------------------------
    async def append(self, response_id: str, entries: Sequence[Entry]) -> None:
        self.append_nowait(response_id, entries)

    def append_nowait(self, response_id: str, entries: Sequence[Entry]) -> None:
        """:meth:`append` without a coroutine (the writer's per-batch fast path). Same errors."""
        log = self._logs.get(response_id)
        if log is None:
            raise KeyError(response_id)
        if not entries:
            return
        if entries[0].sequence_number < len(log.entries):
            entries = self._skip_landed(response_id, log, entries)
            if not entries:
                return
        if not log.ended and entries[0].sequence_number > len(log.entries):
            raise SequenceGap(f"{response_id}: append at {entries[0].sequence_number}, log has {len(log.entries)} "
                              "entries: it would leave a gap", len(log.entries))
        if log.ended or entries[0].sequence_number != len(log.entries):
            raise SequenceConflict(
                f"{response_id}: append at {entries[0].sequence_number}, log has {len(log.entries)} entries"
                + (" and has ended" if log.ended else "")
            )
        log.entries.extend(entries)
        size = entry_bytes(entries)
        log.size += size
        self.bytes += size
        if entries[-1].terminal:
            log.ended = True
        log.wake()  # (no eviction here: the append fast path stays O(1); update() and create() evict)

    @staticmethod
    def _skip_landed(response_id: str, log: _Log, entries: Sequence[Entry]) -> Sequence[Entry]:
        """Idempotent by sequence number (as the durable stores): entries of a retried batch that the log already
        holds, identical, are skipped; a different entry at a taken number is a ``SequenceConflict``."""
        landed = 0
        for entry in entries:
            seq = entry.sequence_number
            if seq >= len(log.entries):
                break
            held = log.entries[seq]
            if seq < 0 or (held is not entry and (held.type, held.data) != (entry.type, entry.data)):
                raise SequenceConflict(f"{response_id}: append at {seq}, log has {len(log.entries)} entries")
            landed += 1
        return entries[landed:]

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        return [e if e.__class__ is LogEntry else e.entry()  # type: ignore[union-attr]
                for e in self.read_entries(response_id, after, limit)]

    def read_entries(self, response_id: str, after: int = -1, limit: int | None = None) -> list[Entry]:
        """:meth:`read` as stored: compact ``DeltaEntry`` objects stay compact (the SSE sender's path)."""
        log = self._logs.get(response_id)
        if log is None:
            return []
        start = max(after + 1, 0)
        return log.entries[start:] if limit is None else log.entries[start : start + limit]

    def waiter(self, response_id: str, after: int) -> asyncio.Future[None] | None:
        """A future resolved by the next append (or end, delete, close); None when the log already holds an entry
        after ``after``, has ended, or is gone. Whoever resolves or abandons it first may call :meth:`drop_waiter`."""
        log = self._logs.get(response_id)
        if log is None or log.ended or len(log.entries) > after + 1:
            return None
        fut = asyncio.get_running_loop().create_future()
        log.waiters.append(fut)
        return fut

    def listen(self, response_id: str, after: int, listener: Callable[[], None]) -> bool:
        """Call ``listener()`` after every append to the log (and its end, delete, close) until :meth:`unlisten`;
        False (nothing registered) under the same conditions :meth:`waiter` returns None. A listener runs inside
        the append: it must be quick and must not raise (the SSE sender's direct path, server/http/direct_send.py)."""
        log = self._logs.get(response_id)
        if log is None or log.ended or len(log.entries) > after + 1:
            return False
        log.listeners.append(listener)
        return True

    def unlisten(self, response_id: str, listener: Callable[[], None]) -> None:
        log = self._logs.get(response_id)
        if log is not None:
            with contextlib.suppress(ValueError):
                log.listeners.remove(listener)

    def drop_waiter(self, response_id: str, fut: asyncio.Future[None]) -> None:
        """Forget a waiter its reader stopped waiting on (a keep-alive tick resolved it first)."""
        log = self._logs.get(response_id)
        if log is not None:
            with contextlib.suppress(ValueError):
                log.waiters.remove(fut)

    async def wait_beyond(self, response_id: str, after: int) -> None:
        """Return once the log holds an entry after ``after``, has ended, or is gone. Cancel-safe."""
        while (fut := self.waiter(response_id, after)) is not None:
            try:
                await fut
            except BaseException:
                self.drop_waiter(response_id, fut)  # cancelled: do not leave it in the list until the next append
                raise

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

    # -- conversations (memory_conversations.py: items indexed by id, counted in ``bytes`` at their real size) -----
    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]:
        return self._conversations.items(conversation_id, newest=newest, oldest=oldest)

    async def conversation_after(self, conversation_id: str, item_id: str, *, count: int,
                                 newer: bool) -> list[dict[str, Any]] | None:
        return self._conversations.after(conversation_id, item_id, count=count, newer=newer)

    async def extend_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        """Add items, refused (``StoreUnavailable``) when they do not fit ``max_bytes`` once finished responses
        were dropped to make room."""
        sizes = item_bytes(items)
        self._evict(room_bytes=sum(sizes))
        if self.bytes + sum(sizes) > self._max_bytes:
            raise StoreUnavailable(
                f"the memory store is full ({self.bytes} of max {self._max_bytes} bytes held by conversations and "
                f"running responses; new conversation items need {sum(sizes)}; setting memory_store_max_bytes)")
        self.bytes += self._conversations.extend(conversation_id, items, sizes)

    async def create_conversation(self, record: ConversationRecord) -> None:
        self._conversation_objects[record.id] = replace(record, metadata=dict(record.metadata))

    async def get_conversation(self, conversation_id: str) -> ConversationRecord | None:
        found = self._conversation_objects.get(conversation_id)
        return None if found is None else replace(found, metadata=dict(found.metadata))

    async def update_conversation(self, record: ConversationRecord) -> None:
        if record.id in self._conversation_objects:
            self._conversation_objects[record.id] = replace(record, metadata=dict(record.metadata))

    async def delete_conversation(self, conversation_id: str) -> bool:
        self.bytes -= self._conversations.drop(conversation_id)
        return self._conversation_objects.pop(conversation_id, None) is not None

    async def conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        found = self._conversations.item(conversation_id, item_id)
        return None if found is None else dict(found)

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        freed = self._conversations.delete_item(conversation_id, item_id)
        self.bytes -= freed or 0
        return freed is not None

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
            log.wake()

    # -- retention -------------------------------------------------------------------------------------------------
    def _evict(self, now: float | None = None, room: int = 0, room_bytes: int = 0) -> None:
        """Drop finished responses past retention, and the oldest finished ones past ``max_responses`` or
        ``max_bytes`` (making ``room`` responses and ``room_bytes`` bytes of room).

        Walks from the oldest and stops at the first finished response it keeps, so the usual call (nothing to drop)
        costs one look, not a copy of every retained id."""
        now = time.time() if now is None else now
        over = len(self._records) - self._max_responses + room
        over_bytes = self.bytes + room_bytes - self._max_bytes
        victims: list[str] = []
        for response_id, record in self._records.items():
            if record.status not in _FINISHED:
                continue
            if over > 0 or over_bytes > 0 or now - record.created_at > self._retention:
                victims.append(response_id)
                over -= 1
                log = self._logs.get(response_id)
                over_bytes -= self._record_sizes.get(response_id, 0) + (log.size if log is not None else 0)
            else:
                break
        for response_id in victims:
            del self._records[response_id]
            self._forget(response_id)
