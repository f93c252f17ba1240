"""The deferred-work queue (store/deferred_queue.py) in the SQLite file of the background store: one table, taken
and renewed in ``BEGIN IMMEDIATE`` transactions, so several gateway processes on one machine share it safely."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from respstream.server.store.base import StoreUnavailable
from respstream.server.store.deferred_queue import QueuedWork, QueueStats, decode_work, encode_work

__all__ = ["SQLiteDeferredQueue"]

_SCHEMA = """CREATE TABLE IF NOT EXISTS deferred_work (
    response_id TEXT PRIMARY KEY, deadline REAL NOT NULL, enqueued_at REAL NOT NULL, window TEXT NOT NULL,
    work BLOB NOT NULL, holder TEXT, lease_until REAL NOT NULL DEFAULT 0)"""


class SQLiteDeferredQueue:
    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()  # one connection: one job at a time (each is a short transaction)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.execute("CREATE INDEX IF NOT EXISTS deferred_work_by_deadline ON deferred_work(deadline)")
            self._conn = conn
        return self._conn

    async def _job(self, job: object, *args: object) -> object:
        def run() -> object:
            conn = self._connection()
            try:
                return job(conn, *args)  # type: ignore[operator]
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreUnavailable(f"deferred queue ({self.path}): {exc}") from exc

        async with self._lock:
            return await asyncio.to_thread(run)

    async def put(self, work: QueuedWork) -> None:
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO deferred_work(response_id, deadline, enqueued_at, window, work) "
                         "VALUES (?, ?, ?, ?, ?)", (work.response_id, work.deadline, work.enqueued_at, work.window,
                                                    encode_work(work)))

        await self._job(job)

    async def take(self, holder: str, lease_seconds: float, now: float, due_by: float | None = None
                   ) -> QueuedWork | None:
        def job(conn: sqlite3.Connection) -> QueuedWork | None:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT response_id, work FROM deferred_work WHERE lease_until <= ? AND deadline <= ? "
                "ORDER BY deadline, enqueued_at LIMIT 1", (now, float("inf") if due_by is None else due_by),
            ).fetchone()
            if row is None:
                conn.execute("COMMIT")
                return None
            conn.execute("UPDATE deferred_work SET holder = ?, lease_until = ? WHERE response_id = ?",
                         (holder, now + lease_seconds, row[0]))
            conn.execute("COMMIT")
            return decode_work(row[1])

        return await self._job(job)  # type: ignore[return-value]

    async def renew(self, response_id: str, holder: str, lease_seconds: float, now: float) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute("UPDATE deferred_work SET lease_until = ? WHERE response_id = ? AND holder = ? "
                                  "AND lease_until > ?", (now + lease_seconds, response_id, holder, now))
            return cursor.rowcount == 1

        return bool(await self._job(job))

    async def done(self, response_id: str) -> None:
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM deferred_work WHERE response_id = ?", (response_id,))

        await self._job(job)

    async def remove_waiting(self, response_id: str, now: float) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute("DELETE FROM deferred_work WHERE response_id = ? AND lease_until <= ?",
                                  (response_id, now))
            return cursor.rowcount == 1

        return bool(await self._job(job))

    async def stats(self, now: float) -> QueueStats:
        def job(conn: sqlite3.Connection) -> QueueStats:
            waiting, oldest, nearest = conn.execute(
                "SELECT count(*), min(enqueued_at), min(deadline) FROM deferred_work WHERE lease_until <= ?",
                (now,)).fetchone()
            (taken,) = conn.execute("SELECT count(*) FROM deferred_work WHERE lease_until > ?", (now,)).fetchone()
            return QueueStats(waiting=waiting, taken=taken, oldest_wait=now - oldest if waiting else 0.0,
                              least_slack=nearest - now if waiting else None)

        return await self._job(job)  # type: ignore[return-value]

    async def aclose(self) -> None:
        async with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await asyncio.to_thread(conn.close)
