"""The SQLite store: one file, WAL, survives restarts; several processes on one machine may share it.

How this works:
- All database work runs off the event loop. Writes go to ONE dedicated writer thread (sqlite_writer.py: group
  commit, one transaction per batch of jobs); reads run on a small pool of reader threads, each with its own
  connection (WAL lets them read while the writer writes). The tables and the log's jobs are in sqlite_log.py,
  leases and the ending of lost logs in sqlite_leases.py, conversations in sqlite_conversations.py.
- ``tail()`` wakes readers in this process once per committed batch (an ``asyncio.Event`` per tailed response).
  Readers in *other* processes sharing the file cannot be signalled, so an idle tail also re-reads every
  ``poll_interval`` seconds (default 0.2 s): cross-process tail latency is at most that.
- An idle tail whose log is leased, past ``lease_until`` and unfinished asks the writer thread to end it with
  ``worker_lost`` (``sqlite_leases.end_if_lost``, which re-checks inside the transaction: exactly one terminal).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import msgspec

from respstream.server.store.base import LogEntry, ResponseRecord, StoreUnavailable
from respstream.server.store.sqlite_conversations import (
    CONVERSATION_SCHEMA,
    SQLiteConversations,
    expire_conversations,
)
from respstream.server.store.sqlite_leases import SQLiteLeases, end_if_lost, end_log
from respstream.server.store.sqlite_log import LOG_SCHEMA, append_rows, event_rows, select, tail_step
from respstream.server.store.sqlite_writer import SQLiteWriter, connect

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_SCHEMA = LOG_SCHEMA + CONVERSATION_SCHEMA
_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(ResponseRecord).decode


class SQLiteStore(SQLiteLeases, SQLiteConversations):
    """A durable store in one SQLite file.

    ``instance_id`` names this process as a lease holder (random when not given); ``lease_seconds`` is how long a
    lease lasts without renewal; ``poll_interval`` bounds cross-process tail latency; ``history_limit`` keeps only
    the newest items of each conversation. Raises ``StoreUnavailable`` when the file cannot be opened.
    """

    def __init__(
        self,
        path: str,
        *,
        retention_seconds: float = 86400,
        instance_id: str | None = None,
        lease_seconds: float = 10.0,
        poll_interval: float = 0.2,
        history_limit: int | None = None,
    ) -> None:
        self.path = path
        self.retention_seconds = retention_seconds
        self.instance_id = instance_id or uuid.uuid4().hex
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.history_limit = history_limit
        try:
            self._writer = SQLiteWriter(path, _SCHEMA)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite store {path!r}: {exc}") from exc
        self._writer.start()
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sqlite-reader")
        self._signals: weakref.WeakValueDictionary[str, asyncio.Event] = weakref.WeakValueDictionary()
        self._closed = False

    # --- plumbing -------------------------------------------------------------------------------------------------

    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreUnavailable("the SQLite store is closed")
        return await asyncio.wrap_future(self._writer.submit(job))

    async def _read(self, job: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreUnavailable("the SQLite store is closed")

        def run() -> T:
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = connect(self.path)
                self._reader_conns.append(conn)
            try:
                return job(conn)
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"SQLite read failed: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(self._readers, run)

    def _signal(self, response_id: str) -> asyncio.Event:
        event = self._signals.get(response_id)
        if event is None:
            event = self._signals[response_id] = asyncio.Event()
        return event

    def _notify(self, response_id: str) -> None:
        event = self._signals.pop(response_id, None)
        if event is not None:
            event.set()

    # --- records --------------------------------------------------------------------------------------------------

    async def create(self, record: ResponseRecord) -> None:
        """Store a new record. Raises ``ValueError`` when the id exists, ``StoreUnavailable``."""
        data = _encode(record)

        def job(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO responses(id, created_at, instance_id, record) VALUES (?, ?, ?, ?)",
                    (record.id, record.created_at, record.instance_id, data),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"response {record.id!r} already exists") from None

        await self._write(job)

    async def get(self, response_id: str) -> ResponseRecord | None:
        row = await self._read(
            lambda c: c.execute("SELECT record FROM responses WHERE id = ?", (response_id,)).fetchone()
        )
        return None if row is None else _decode_record(row[0])

    async def update(self, record: ResponseRecord) -> None:
        """Replace the record; a no-op when it was deleted meanwhile. Raises ``StoreUnavailable``."""
        data = _encode(record)
        await self._write(lambda conn: conn.execute(
            "UPDATE responses SET record = ?, instance_id = ? WHERE id = ?", (data, record.instance_id, record.id)
        ).rowcount)

    async def delete(self, response_id: str) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM events WHERE response_id = ?", (response_id,))
            return conn.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

        deleted = await self._write(job)
        self._notify(response_id)
        return deleted

    # --- the log --------------------------------------------------------------------------------------------------

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        if not entries:
            return
        rows = event_rows(response_id, entries)
        await self._write(lambda conn: append_rows(conn, response_id, rows))
        self._notify(response_id)

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        return await self._read(lambda conn: select(conn, response_id, after, limit))

    async def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        """See ``Store.tail``. Also ends lost logs (expired lease, no terminal) with ``worker_lost``."""
        last = after
        while True:
            signal = self._signal(response_id)  # taken before reading, so a commit after the read still wakes us
            state, batch = await self._read(functools.partial(tail_step, response_id=response_id, after=last))
            for entry in batch:
                yield entry
                last = entry.sequence_number
                if entry.terminal:
                    return
            if batch:
                continue
            if state is None or state[0]:  # deleted, or ended at or before `after`
                return
            lease_until = state[1]
            if lease_until is not None and lease_until < time.time():
                if await self._write(lambda conn: end_if_lost(conn, response_id, time.time())):
                    self._notify(response_id)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await signal.wait()

    # --- retention, closing ---------------------------------------------------------------------------------------

    async def expire(self, now: float | None = None) -> int:
        at = time.time() if now is None else now
        cutoff = at - self.retention_seconds

        def job(conn: sqlite3.Connection) -> tuple[list[str], list[str]]:
            old = [r[0] for r in conn.execute("SELECT id FROM responses WHERE created_at < ?", (cutoff,))]
            for rid in old:
                conn.execute("DELETE FROM events WHERE response_id = ?", (rid,))
                conn.execute("DELETE FROM responses WHERE id = ?", (rid,))
            expire_conversations(conn, cutoff)
            lost = [r[0] for r in conn.execute(
                "SELECT id FROM responses WHERE ended = 0 AND lease_until IS NOT NULL AND lease_until < ?", (at,))]
            for rid in lost:
                end_log(conn, rid)
            return old, lost

        old, lost = await self._write(job)
        for rid in old + lost:
            self._notify(rid)
        return len(old)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.stop()
        await asyncio.to_thread(self._writer.join)
        self._readers.shutdown(wait=True)
        for conn in self._reader_conns:
            conn.close()
