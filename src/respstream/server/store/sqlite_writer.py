"""The SQLite store's connections: the one writer thread (group commit) and how a reader connects.

How this works: every write of the store is a job (a function of a connection) handed to ONE dedicated writer thread
through a queue. The thread takes every job waiting (group commit), runs each in its own SAVEPOINT inside one
``BEGIN IMMEDIATE`` transaction and commits once, so a burst of appends from many responses costs one fsync-free WAL
commit (``synchronous=NORMAL``: durable across a process crash, not across power loss). A job that raises is rolled
back to its savepoint and gets its exception; the others of the batch still commit. When the transaction itself
fails (the file locked by another process for longer than ``LOCK_WAIT_SECONDS``, disk full) every job of the batch
gets ``StoreUnavailable``. Readers use connections of their own (:func:`connect`; WAL lets them read while the writer
writes).
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from respstream.server.store.base import StoreUnavailable

__all__ = ["LOCK_WAIT_SECONDS", "SQLiteWriter", "connect"]

T = TypeVar("T")

_STOP = object()
# How long a write waits for another process holding the file's write lock before it fails (StoreUnavailable).
LOCK_WAIT_SECONDS = 10.0


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class SQLiteWriter(threading.Thread):
    """The one thread that writes: group commit, one SAVEPOINT per job so a refused job leaves the others alone.

    Creates ``schema`` (``CREATE ... IF NOT EXISTS`` statements) when it opens the file. Raises ``sqlite3.Error``
    when the file cannot be opened."""

    def __init__(self, path: str, schema: str) -> None:
        super().__init__(name=f"sqlite-writer:{os.path.basename(path)}", daemon=True)
        self.conn = connect(path)
        self.conn.executescript(schema)
        # The write lock is waited for in _begin(), not by SQLite's busy handler: that one sleeps 1, 2, 5, 10... ms
        # between tries, so with two processes sharing the file each commit of one made the other sleep for
        # milliseconds although the lock is held for microseconds (`serve --workers 2` stalled on it).
        self.conn.execute("PRAGMA busy_timeout = 0")
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> Future[T]:
        fut: Future[T] = Future()
        self.jobs.put((job, fut))
        return fut

    def stop(self) -> None:
        """Ask the thread to close its connection and end once the jobs queued before this are committed."""
        self.jobs.put(_STOP)

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
