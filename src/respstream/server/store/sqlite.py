"""The SQLite store: one file, WAL, survives restarts; several processes on one machine may share it.

How this works:
- All database work runs off the event loop. Writes go to ONE dedicated writer thread through a queue; the thread
  takes every job waiting (group commit), runs each in its own SAVEPOINT inside one ``BEGIN IMMEDIATE`` transaction
  and commits once, so a burst of appends from many responses costs one fsync-free WAL commit
  (``synchronous=NORMAL``: durable across a process crash, not across power loss). Reads run on a small pool of
  reader threads, each with its own connection (WAL lets them read while the writer writes).
- ``tail()`` wakes readers in this process once per committed batch (an ``asyncio.Event`` per tailed response).
  Readers in *other* processes sharing the file cannot be signalled, so an idle tail also re-reads every
  ``poll_interval`` seconds (default 0.2 s): cross-process tail latency is at most that.
- Leases live in the ``responses`` row (``lease_owner``, ``lease_until``; released = 0). An idle tail whose log is
  leased, past ``lease_until`` and unfinished asks the writer thread to end it with ``worker_lost``; that job re-checks
  inside the transaction, so exactly one terminal is written, at last + 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import queue
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec

from respstream.server.store.base import LogEntry, ResponseRecord, SequenceConflict, SequenceGap, StoreUnavailable
from respstream.server.store.lease import lost_record, renewing, worker_lost_entries
from respstream.server.store.sqlite_conversations import (
    CONVERSATION_SCHEMA,
    SQLiteConversations,
    expire_conversations,
)

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses(
    id TEXT PRIMARY KEY, created_at REAL NOT NULL, instance_id TEXT, record BLOB NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT -1, ended INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT, lease_until REAL);
CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at);
CREATE INDEX IF NOT EXISTS responses_open ON responses(instance_id) WHERE ended = 0;
CREATE TABLE IF NOT EXISTS events(
    response_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL,
    terminal INTEGER NOT NULL, PRIMARY KEY(response_id, seq)) WITHOUT ROWID;
""" + CONVERSATION_SCHEMA

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(ResponseRecord).decode
_STOP = object()
_TAIL_BATCH = 1000
# How long a write waits for another process holding the file's write lock before it fails (StoreUnavailable).
LOCK_WAIT_SECONDS = 10.0


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class _Writer(threading.Thread):
    """The one thread that writes: group commit, one SAVEPOINT per job so a refused job leaves the others alone."""

    def __init__(self, path: str) -> None:
        super().__init__(name=f"sqlite-writer:{os.path.basename(path)}", daemon=True)
        self.conn = _connect(path)
        self.conn.executescript(_SCHEMA)
        # The write lock is waited for in _begin(), not by SQLite's busy handler: that one sleeps 1, 2, 5, 10... ms
        # between tries, so with two processes sharing the file each commit of one made the other sleep for
        # milliseconds although the lock is held for microseconds (`serve --workers 2` stalled on it).
        self.conn.execute("PRAGMA busy_timeout = 0")
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> Future[T]:
        fut: Future[T] = Future()
        self.jobs.put((job, fut))
        return fut

    def run(self) -> None:
        while True:
            first = self.jobs.get()
            if first is _STOP:
                self.conn.close()
                return
            batch = [first]
            while len(batch) < 512:
                try:
                    more = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    self.jobs.put(_STOP)  # handled once this batch is committed
                    break
                batch.append(more)
            self._run_batch(batch)

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting up to ``LOCK_WAIT_SECONDS`` for another process's write to end: short
        sleeps (0.1 ms doubling to 2 ms), in this thread, never on the event loop. Raises ``sqlite3.Error``."""
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        pause = 0.0001
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.002)

    def _run_batch(self, batch: list[tuple[Callable[[sqlite3.Connection], Any], Future[Any]]]) -> None:
        # Claim each future before running its job: a caller that was cancelled meanwhile gets no write at all, and
        # a claimed future can no longer be cancelled, so setting its result below cannot raise InvalidStateError
        # (which would kill this thread and hang every later write).
        batch = [(job, fut) for job, fut in batch if fut.set_running_or_notify_cancel()]
        if not batch:
            return
        results: list[tuple[bool, Any]] = []
        try:
            self._begin()
            for job, _ in batch:
                self.conn.execute("SAVEPOINT job")
                try:
                    results.append((True, job(self.conn)))
                    self.conn.execute("RELEASE job")
                except Exception as exc:  # the job's own failure: undo it, keep the rest of the batch
                    self.conn.execute("ROLLBACK TO job")
                    self.conn.execute("RELEASE job")
                    results.append((False, exc))
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:  # the transaction itself failed (locked too long, disk full, file gone)
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            results = [(False, StoreUnavailable(f"SQLite write failed: {exc}"))] * len(batch)
        for (_, fut), (ok, value) in zip(batch, results, strict=True):
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


class SQLiteStore(SQLiteConversations):
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
            self._writer = _Writer(path)
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
                conn = self._local.conn = _connect(self.path)
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
        rows = [(response_id, e.sequence_number, e.type, e.data, int(e.terminal)) for e in entries]
        await self._write(lambda conn: _append(conn, response_id, rows))
        self._notify(response_id)

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        return await self._read(lambda conn: _select(conn, response_id, after, limit))

    async def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        """See ``Store.tail``. Also ends lost logs (expired lease, no terminal) with ``worker_lost``."""
        last = after
        while True:
            signal = self._signal(response_id)  # taken before reading, so a commit after the read still wakes us
            state, batch = await self._read(functools.partial(_tail_step, response_id=response_id, after=last))
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
                if await self._write(lambda conn: _end_if_lost(conn, response_id, time.time())):
                    self._notify(response_id)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await signal.wait()

    # --- leases, recovery, retention ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hold_lease(self, response_id: str) -> AsyncIterator[None]:
        """See ``Store.hold_lease``. Raises ``KeyError`` when the response does not exist."""
        owner = self.instance_id

        def take(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE responses SET lease_owner = ?, lease_until = ? WHERE id = ?",
                (owner, time.time() + self.lease_seconds, response_id),
            )
            if cur.rowcount == 0:
                raise KeyError(response_id)

        def renew(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE responses SET lease_until = ? WHERE id = ? AND lease_owner = ? AND ended = 0",
                (time.time() + self.lease_seconds, response_id, owner),
            )

        def release(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE responses SET lease_until = 0 WHERE id = ? AND lease_owner = ?", (response_id, owner))

        await self._write(take)
        try:
            async with renewing(lambda: self._write(renew), self.lease_seconds / 3):
                yield
        finally:
            with contextlib.suppress(StoreUnavailable):
                await self._write(release)
            self._notify(response_id)  # an unfinished log is now lost: let tails notice at once

    async def recover(self, instance_id: str) -> int:
        def job(conn: sqlite3.Connection) -> list[str]:
            ids = [r[0] for r in conn.execute("SELECT id FROM responses WHERE instance_id = ? AND ended = 0",
                                              (instance_id,))]
            for rid in ids:
                _end_log(conn, rid)
            return ids

        ended = await self._write(job)
        for rid in ended:
            self._notify(rid)
        return len(ended)

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
                _end_log(conn, rid)
            return old, lost

        old, lost = await self._write(job)
        for rid in old + lost:
            self._notify(rid)
        return len(old)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.jobs.put(_STOP)
        await asyncio.to_thread(self._writer.join)
        self._readers.shutdown(wait=True)
        for conn in self._reader_conns:
            conn.close()


# --- jobs (run on the writer / reader threads) ----------------------------------------------------------------------


def _append(conn: sqlite3.Connection, response_id: str, rows: list[tuple[str, int, str, bytes, int]]) -> None:
    state = conn.execute("SELECT last_seq, ended FROM responses WHERE id = ?", (response_id,)).fetchone()
    if state is None:
        raise KeyError(response_id)
    last, ended = state
    seqs = [r[1] for r in rows]
    if any(b != a + 1 for a, b in itertools.pairwise(seqs)):
        raise SequenceConflict(f"response {response_id}: sequence numbers {seqs[0]}..{seqs[-1]} not consecutive")
    # Idempotent by sequence number: a retried batch whose first attempt landed (the commit happened, its answer was
    # lost) re-sends entries the log already holds. Those are recognised (same number, type and bytes) and skipped.
    landed = sum(1 for seq in seqs if seq <= last)
    if landed:
        stored = conn.execute(
            "SELECT seq, type, data, terminal FROM events WHERE response_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
            (response_id, seqs[0], seqs[landed - 1]),
        ).fetchall()
        if [(q, t, bytes(d), x) for q, t, d, x in stored] != [r[1:] for r in rows[:landed]]:
            # Say when the log was ended by someone else (worker_lost after a lapsed lease, a cancel from another
            # instance): "not after N" alone reads like a duplicate append of our own.
            ended_by = f": the log has already ended (terminal at {last})" if ended else ""
            raise SequenceConflict(
                f"response {response_id}: sequence numbers {seqs[0]}..{seqs[landed - 1]} not after {last}{ended_by}")
        rows, seqs = rows[landed:], seqs[landed:]
        if not rows:
            return
    if ended:
        raise SequenceConflict(f"response {response_id}: the log has already ended (terminal at {last})")
    if seqs[0] != last + 1:  # a hole: refused, never written (see SequenceGap)
        raise SequenceGap(f"response {response_id}: append at {seqs[0]}, the log's next is {last + 1}", last + 1)
    try:
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)
    except sqlite3.IntegrityError as exc:  # unreachable unless the counters disagree; keep the error clear anyway
        raise SequenceConflict(f"response {response_id}: duplicate sequence number ({exc})") from exc
    conn.execute(
        "UPDATE responses SET last_seq = ?, ended = ? WHERE id = ?",
        (seqs[-1], int(any(r[4] for r in rows)), response_id),
    )


def _select(conn: sqlite3.Connection, response_id: str, after: int, limit: int | None) -> list[LogEntry]:
    rows = conn.execute(
        "SELECT seq, type, data, terminal FROM events WHERE response_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (response_id, after, -1 if limit is None else limit),
    ).fetchall()
    return [LogEntry(seq, type_, bytes(data), bool(term)) for seq, type_, data, term in rows]


def _tail_step(
    conn: sqlite3.Connection, response_id: str, after: int
) -> tuple[tuple[bool, float | None] | None, list[LogEntry]]:
    # State first, then entries: a later snapshot only ever holds more, so "ended" + no entries means done.
    row = conn.execute("SELECT ended, lease_until FROM responses WHERE id = ?", (response_id,)).fetchone()
    state = None if row is None else (bool(row[0]), row[1])
    return state, _select(conn, response_id, after, _TAIL_BATCH)


def _end_log(conn: sqlite3.Connection, response_id: str) -> bool:
    """Append ``worker_lost`` and mark the record failed, if the log is still open. Runs inside the transaction."""
    row = conn.execute("SELECT record, last_seq, ended FROM responses WHERE id = ?", (response_id,)).fetchone()
    if row is None or row[2]:
        return False
    record = _decode_record(row[0])
    entries = worker_lost_entries(record, row[1] + 1)
    _append(conn, response_id, [(response_id, e.sequence_number, e.type, e.data, int(e.terminal)) for e in entries])
    conn.execute("UPDATE responses SET record = ? WHERE id = ?", (_encode(lost_record(record)), response_id))
    return True


def _end_if_lost(conn: sqlite3.Connection, response_id: str, now: float) -> bool:
    row = conn.execute("SELECT lease_until FROM responses WHERE id = ? AND ended = 0", (response_id,)).fetchone()
    if row is None or row[0] is None or row[0] >= now:
        return False  # finished, never leased, or renewed meanwhile
    return _end_log(conn, response_id)
