"""The SQLite store's tables of responses and events, and the jobs that append to and read a log.

How this works: ``responses`` holds one row per response: the record's JSON, and the log's state beside it
(``last_seq`` the highest sequence number, ``ended`` = 1 once the terminal is in, the lease columns of
sqlite_leases.py). ``events`` holds the log, keyed by (response id, sequence number). An append is one job on the
writer thread (sqlite_writer.py), so reading the state, checking the batch against it and inserting happen in one
transaction: a refused batch writes nothing. The jobs here take a connection and run on the writer or a reader
thread, never on the event loop.
"""

from __future__ import annotations

import itertools
import sqlite3

from respstream.server.store.base import LogEntry, SequenceConflict, SequenceGap

__all__ = ["LOG_SCHEMA", "TAIL_BATCH", "EventRow", "append_rows", "event_rows", "select", "tail_step"]

LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses(
    id TEXT PRIMARY KEY, created_at REAL NOT NULL, instance_id TEXT, record BLOB NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT -1, ended INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT, lease_until REAL);
CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at);
CREATE INDEX IF NOT EXISTS responses_open ON responses(instance_id) WHERE ended = 0;
CREATE TABLE IF NOT EXISTS events(
    response_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL,
    terminal INTEGER NOT NULL, PRIMARY KEY(response_id, seq)) WITHOUT ROWID;
"""

TAIL_BATCH = 1000  # entries one tail step reads at most

EventRow = tuple[str, int, str, bytes, int]  # a row of `events`: response id, seq, type, data, terminal


def event_rows(response_id: str, entries: list[LogEntry]) -> list[EventRow]:
    return [(response_id, e.sequence_number, e.type, e.data, int(e.terminal)) for e in entries]


def append_rows(conn: sqlite3.Connection, response_id: str, rows: list[EventRow]) -> None:
    """Append ``rows`` to the log (inside the writer's transaction). Raises ``KeyError`` (no such response),
    ``SequenceConflict``, ``SequenceGap`` (see ``Store.append``)."""
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


def select(conn: sqlite3.Connection, response_id: str, after: int, limit: int | None) -> list[LogEntry]:
    rows = conn.execute(
        "SELECT seq, type, data, terminal FROM events WHERE response_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (response_id, after, -1 if limit is None else limit),
    ).fetchall()
    return [LogEntry(seq, type_, bytes(data), bool(term)) for seq, type_, data, term in rows]


def tail_step(
    conn: sqlite3.Connection, response_id: str, after: int
) -> tuple[tuple[bool, float | None] | None, list[LogEntry]]:
    """(None if the response is gone, else (ended, lease_until)), and up to ``TAIL_BATCH`` entries after ``after``."""
    # State first, then entries: a later snapshot only ever holds more, so "ended" + no entries means done.
    row = conn.execute("SELECT ended, lease_until FROM responses WHERE id = ?", (response_id,)).fetchone()
    state = None if row is None else (bool(row[0]), row[1])
    return state, select(conn, response_id, after, TAIL_BATCH)
