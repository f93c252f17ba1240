"""SQLite only: the log survives a restart; several stores (processes) share one file."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from store_helpers import collect, entries, new_record, write_log

from respstream.server.store import sqlite_writer
from respstream.server.store.base import LogEntry, ResponseRecord, StoreUnavailable
from respstream.server.store.sqlite import SQLiteStore

pytestmark = pytest.mark.timeout(60)


async def test_finished_and_unfinished_logs_survive_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "restart.db")
    first = SQLiteStore(path, instance_id="gw-1")
    done, running = new_record(instance_id="gw-1"), new_record(instance_id="gw-1")
    for record in (done, running):
        await first.create(record)
    await write_log(first, done.id, 50, 8)
    await first.append(running.id, entries(0, 7))
    await first.extend_conversation("c1", [{"role": "user", "content": "hi"}])
    await first.aclose()

    second = SQLiteStore(path, instance_id="gw-1")
    try:
        replay = await collect(second.tail(done.id))
        assert [e.sequence_number for e in replay] == list(range(50)) and replay[-1].terminal
        assert replay == await second.read(done.id)
        assert await second.get(done.id) == done
        assert await second.conversation("c1") == [{"role": "user", "content": "hi"}]
        assert await second.recover("gw-1") == 1  # startup: the interrupted one ends, the finished one stays
        tail = await collect(second.tail(running.id, after=6))
        assert [(e.sequence_number, orjson.loads(e.data)["code"]) for e in tail] == [(7, "worker_lost")]
    finally:
        await second.aclose()


async def test_uses_wal_and_the_documented_tables(tmp_path: Path) -> None:
    path = tmp_path / "layout.db"
    store = SQLiteStore(str(path))
    await store.create(new_record())
    await store.aclose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert {"responses", "events", "conversations"} <= tables


async def test_reader_in_another_store_on_the_same_file_follows_by_polling(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    writer, reader = SQLiteStore(path), SQLiteStore(path, poll_interval=0.02)
    try:
        record = new_record()
        await writer.create(record)
        task = asyncio.create_task(collect(reader.tail(record.id)))
        await write_log(writer, record.id, 40, 4, pause=0.005)
        got = await asyncio.wait_for(task, 5)
        assert [e.sequence_number for e in got] == list(range(40))
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_closed_store_raises_store_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "closed.db"))
    await store.aclose()
    with pytest.raises(StoreUnavailable):
        await store.get("x")
    with pytest.raises(StoreUnavailable):
        await store.append("x", entries(0, 1))


def test_unopenable_path_raises_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open"):
        SQLiteStore(str(tmp_path / "no-such-dir" / "x.db"))


def test_writer_skips_jobs_whose_caller_was_cancelled_and_keeps_running(tmp_path: Path) -> None:
    # A cancelled future used to make set_result raise InvalidStateError inside the writer thread, killing it.
    from concurrent.futures import Future

    from respstream.server.store.sqlite_writer import SQLiteWriter

    writer = SQLiteWriter(str(tmp_path / "w.db"), "")
    ran: list[str] = []

    def job(name: str) -> Any:
        def run(conn: Any) -> str:
            ran.append(name)
            return name

        return run

    cancelled: Future[Any] = Future()
    cancelled.cancel()
    kept: Future[Any] = Future()
    writer._run_batch([(job("cancelled"), cancelled), (job("kept"), kept)])
    assert ran == ["kept"]
    assert kept.result(timeout=1) == "kept"
    only_cancelled: Future[Any] = Future()
    only_cancelled.cancel()
    writer._run_batch([(job("cancelled"), only_cancelled)])  # a batch of only cancelled jobs is a no-op
    assert ran == ["kept"]
    writer.conn.close()


async def test_two_writers_on_one_file_wait_for_each_other_briefly(tmp_path: Any) -> None:
    """Two stores on one file (as two `serve --workers` processes): every append lands, and a lock held by the other
    writer is waited for in short steps, not SQLite's millisecond busy-handler sleeps."""
    path = str(tmp_path / "shared.db")
    a, b = SQLiteStore(path), SQLiteStore(path)
    try:
        for store, rid in ((a, "ra"), (b, "rb")):
            await store.create(ResponseRecord(id=rid, status="in_progress", created_at=0.0))

        async def writes(store: SQLiteStore, rid: str) -> None:
            for seq in range(300):
                await store.append(rid, [LogEntry(seq, "response.output_text.delta", b'{"n":%d}' % seq, False)])

        started = time.monotonic()
        await asyncio.gather(writes(a, "ra"), writes(b, "rb"))
        took = time.monotonic() - started
        assert [e.sequence_number for e in await b.read("ra")] == list(range(300))
        assert [e.sequence_number for e in await a.read("rb")] == list(range(300))
        assert took < 20  # 600 contended commits; with ms-long busy sleeps this took far longer under load
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_write_lock_held_too_long_is_store_unavailable(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(sqlite_writer, "LOCK_WAIT_SECONDS", 0.3)
    path = str(tmp_path / "held.db")
    store = SQLiteStore(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await store.create(ResponseRecord(id="r1", status="in_progress", created_at=0.0))
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock and does not let go
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.append("r1", [LogEntry(0, "response.created", b"{}", False)])
        other.execute("ROLLBACK")
        await store.append("r1", [LogEntry(0, "response.created", b"{}", False)])  # free again: it goes through
        assert len(await store.read("r1")) == 1
    finally:
        other.close()
        await store.aclose()
