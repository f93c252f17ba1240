"""How a writer's queued events get into the store: batches, writes a cancellation cannot cut, retries.

How this works: the writer queues log entries in ``_pending``; :meth:`LogFlushing.flush` appends them to the store in
one call, which wakes every reader once per batch. On a store with a synchronous append (memory) the writer also
schedules :meth:`LogFlushing._flush_now` once per event-loop turn, so a burst of deltas is one batch without any
``await``. A write is never interrupted half way by a cancellation (it runs as its own task, shielded; the next flush
waits for it), so batches land in order and none is lost; ``StoreUnavailable`` puts the batch back in front of the
queue so a later flush appends it without a gap in the sequence numbers.

Group commit (:meth:`LogFlushing.flush_behind`, what a streaming round calls on an awaited store: SQLite, Redis):
one write in flight at a time, started as soon as there is something to write; the events that come while it runs
wait in the queue and go together in the next write. Before, every upstream chunk was one awaited append (~260 us of
CPU per event on SQLite, docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from respstream.server.events.frames import terminal_outcome
from respstream.server.store.base import (
    Entry,
    LogEntry,
    ResponseRecord,
    SequenceConflict,
    Store,
    StoreUnavailable,
)

__all__ = ["LogFlushing", "ResponseDeleted", "plain_entries"]


class ResponseDeleted(Exception):
    """The store no longer has this response (deleted, e.g. from another instance, or expired): stop writing."""


class LogFlushing:
    """The store side of :class:`~respstream.server.events.writer.ResponseWriter` (a mixin: it shares the writer's
    state)."""

    record: ResponseRecord
    response: dict[str, Any]
    _store: Store
    _pending: list[Entry]
    _closed: bool
    _on_flush: Callable[[int], None] | None
    _append_nowait: Callable[[str, list[Entry]], None] | None
    _compact: bool
    _soon: asyncio.Handle | None
    _inflight: asyncio.Future[None] | None
    _update_encoded: Callable[[ResponseRecord, bytes], Awaitable[None]] | None
    _terminal_response: dict[str, Any] | None

    @property
    def needs_flush_await(self) -> bool:
        """True when the store has no synchronous append, so the pipeline group-commits (``flush_behind``) and awaits
        ``flush()`` at the end of each round."""
        return self._append_nowait is None

    def _flush_now(self) -> None:
        """Deltas on a store with a synchronous append (memory): one batch per event-loop turn, so readers wake once
        per batch of upstream chunks, not once per event."""
        self._soon = None
        if self._pending and self._append_nowait is not None and not self._pending[-1].terminal:
            batch, self._pending = self._pending, []
            self._append_nowait(self.record.id, batch)
            if self._on_flush is not None:
                self._on_flush(len(batch))

    # Seconds a flush keeps retrying a store that is unavailable (a Redis failover, a reconnect) before it raises;
    # 0 = raise at once. The service sets it to the lease: past that, other instances end the log anyway.
    retry_unavailable_seconds: float = 0.0

    async def flush(self) -> None:
        """Append the queued events to the store in one batch (wakes every reader once).

        Raises what the store raises. On ``StoreUnavailable`` the batch stays queued and is retried (with backoff)
        for ``retry_unavailable_seconds``, so a Redis primary failing over to its replica stalls the stream instead
        of failing it; a later ``flush()`` appends what is still queued without a gap in the sequence numbers. A
        cancellation never interrupts a store write half way (the write finishes in the background and the next
        ``flush()`` waits for it first), so batches land in order and none is lost.
        """
        if self.retry_unavailable_seconds <= 0:
            await self._flush_once()
            return
        deadline = time.monotonic() + self.retry_unavailable_seconds
        pause = 0.05
        while True:
            try:
                await self._flush_once()
                return
            except StoreUnavailable:
                if time.monotonic() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    # Group commit: at most this many events wait behind a write still in flight before flush_behind() waits for it.
    group_commit_max: int = 1024

    async def flush_behind(self) -> None:
        """Group commit, for a store without a synchronous append while a round streams (SQLite, Redis): start a
        write of what is queued when none is in flight, else leave it queued, so the events that come while one
        write runs go together in the next one (one append, one transaction, one reader wake-up for all of them).

        Nothing waits for more events: the first write starts at once. This waits only when more than
        ``group_commit_max`` events are queued behind a write still in flight (backpressure), or to retry a write
        that found the store unavailable (as :meth:`flush`). Another failure of a write is raised by the next call,
        or by :meth:`settle` / :meth:`flush`, which a round ends with. Writes stay one at a time and in order.
        """
        task = self._inflight
        if task is not None:
            if not task.done() and len(self._pending) < self.group_commit_max:
                return
            try:
                await asyncio.shield(task)
            except StoreUnavailable:  # its batch is back in front of the queue: retry as flush() does
                self._inflight = None
                await self.flush()
                return
            finally:
                if task.done():
                    self._inflight = None
        if self._pending:
            batch, self._pending = self._pending, []
            self._inflight = asyncio.ensure_future(self._store_batch(batch))

    async def settle(self) -> None:
        """Wait for the write in flight, if any; raise its failure (``StoreUnavailable`` excepted: that batch is
        queued again for the next flush)."""
        if self._inflight is not None:
            await self._settle()

    async def _flush_once(self) -> None:
        if self._inflight is not None:
            await self._settle()
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        if self._append_nowait is not None:  # memory: the coroutines below never suspend, nothing to protect
            await self._store_batch(batch)
            return
        task = asyncio.ensure_future(self._store_batch(batch))
        self._inflight = task
        try:
            await asyncio.shield(task)
        finally:
            if task.done():  # else cancelled while writing: the next flush() settles it
                self._inflight = None

    async def _settle(self) -> None:
        """Wait for a write a cancellation left running; its ``StoreUnavailable`` put the batch back already.

        The write stays in ``_inflight`` until it is done: if this wait is itself cancelled (a cancel racing the end
        of a round), the next flush must still wait for it, or its batch and the next one (the cancel terminal) are
        in flight at once and may reach the store out of order (Redis: two pool connections), leaving a gap."""
        task = self._inflight
        if task is None:
            return
        try:
            await asyncio.shield(task)
        except StoreUnavailable:
            pass
        finally:
            if task.done() and self._inflight is task:
                self._inflight = None

    async def _store_batch(self, batch: list[Entry]) -> None:
        try:
            if batch[-1].terminal:
                self.record.response = self.response
                response_json = self._terminal_response_json(batch[-1])
                if response_json is not None and self._update_encoded is not None:
                    await self._update_encoded(self.record, response_json)
                else:
                    await self._store.update(self.record)
            if self._compact:
                await self._store.append(self.record.id, batch)  # type: ignore[arg-type]  # memory: takes Entry
            else:
                await self._store.append(self.record.id, plain_entries(batch))
        except StoreUnavailable:
            self._pending = batch + self._pending
            raise
        except KeyError:
            raise ResponseDeleted(self.record.id) from None
        except SequenceConflict:
            if batch[-1].terminal:  # our terminal lost to another (worker_lost, a cancel from another instance)
                await self._adopt_log_terminal(batch[0].sequence_number - 1)
            raise
        if self._on_flush is not None:
            self._on_flush(len(batch))

    def _terminal_response_json(self, terminal: Entry) -> bytes | None:
        """The Response as the terminal event's bytes hold it (compact JSON, a copy of exactly its size), for a store
        that takes it encoded: the record's snapshot then costs a slice instead of a second encode. None when the
        terminal does not carry ``self.response`` itself (a flat ``error`` terminal; a response.failed cut to fit
        ``max_event_bytes``), or its bytes do not start as the writer builds them: the store encodes it then.
        (Exact because the terminal is the writer's last event and what is emitted is not edited afterwards.)"""
        if self._update_encoded is None or self._terminal_response is not self.response:
            return None
        data = terminal.data  # type: ignore[union-attr]  # a terminal is always a LogEntry
        head = b'{"type":"%s","sequence_number":%d,"response":' % (terminal.type.encode(), terminal.sequence_number)
        if not (data.startswith(head) and data.endswith(b"}")):
            return None
        return data[len(head):-1]

    async def _adopt_log_terminal(self, after: int) -> None:
        """The log ended with someone else's terminal while ours was refused, but our record update may have
        landed after theirs: make the record say what the log says (the log is the truth)."""
        entries = await self._store.read(self.record.id, after)
        terminal = next((e for e in entries if e.terminal), None)
        if terminal is None:
            return
        status, error = terminal_outcome(terminal)
        self.record.status = status
        self.record.response = {**self.response, "status": status, "error": error}
        await self._store.update(self.record)

    def take_pending(self) -> list[LogEntry]:
        """The queued entries, handed to the caller to append itself (the queue is emptied)."""
        batch, self._pending = self._pending, []
        return plain_entries(batch)

    def abandon(self) -> None:
        """Stop without a terminal of our own: the log was ended by someone else (``SequenceConflict``)."""
        self._closed = True
        self._pending = []


def plain_entries(batch: list[Entry]) -> list[LogEntry]:
    """``batch`` with compact delta entries made into real ones (for stores that keep only LogEntry)."""
    return [e if e.__class__ is LogEntry else e.entry() for e in batch]  # type: ignore[union-attr]

