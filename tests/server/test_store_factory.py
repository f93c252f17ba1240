"""Store selection from the config: memory + the default durable SQLite file for background responses, explicit
URLs, and SQLite writes that survive cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from respstream.server.config import Config, load_config
from respstream.server.http.app import build_store
from respstream.server.store.base import ResponseRecord
from respstream.server.store.factory import open_store
from respstream.server.store.memory import MemoryStore
from respstream.server.store.split import SplitStore


async def test_default_memory_store_sends_background_work_to_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    store = build_store(Config(data_dir=str(tmp_path / "data")))
    assert isinstance(store, SplitStore) and isinstance(store.memory, MemoryStore)
    try:
        await store.create(ResponseRecord(id="fg", status="in_progress", created_at=1.0))
        await store.create(ResponseRecord(id="bg", status="queued", created_at=1.0, background=True))
        await store.extend_conversation("c1", [{"type": "message", "role": "user", "content": "hi"}])
        assert store.backend_of("fg") is store.memory and store.backend_of("bg") is store.durable
        assert await store.memory.get("bg") is None and await store.durable.get("bg") is not None
        assert await store.durable.conversation("c1") == [{"type": "message", "role": "user", "content": "hi"}]
        assert (tmp_path / "data" / "respstream.db").is_file()
    finally:
        await store.aclose()


def test_background_store_memory_and_explicit_stores_are_single(tmp_path: Path) -> None:
    assert isinstance(build_store(Config(background_store="memory")), MemoryStore)
    explicit = Config(store=f"sqlite:///{tmp_path}/one.db")
    assert explicit.resolved_background_store() == explicit.store
    assert not isinstance(build_store(explicit), SplitStore)


def test_data_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RESPSTREAM_DATA_DIR", str(tmp_path / "env"))
    assert Config().resolved_background_store() == f"sqlite:///{tmp_path / 'env' / 'respstream.db'}"
    monkeypatch.delenv("RESPSTREAM_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert Config().resolved_data_dir() == tmp_path / "xdg" / "respstream"
    assert Config(data_dir=str(tmp_path / "cfg")).resolved_data_dir() == tmp_path / "cfg"
    with pytest.raises(ValueError, match="lease_seconds"):
        load_config(None, {"lease_seconds": 0})


def test_unopenable_default_file_falls_back_to_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert isinstance(build_store(Config(data_dir=str(blocker / "sub"))), MemoryStore)
    with pytest.raises(Exception, match="cannot create"):
        build_store(Config(background_store=f"sqlite:///{blocker}/sub/x.db"))


async def test_cancelled_sqlite_writes_do_not_break_the_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    record = ResponseRecord(id="r", status="in_progress", created_at=1.0)
    try:
        await store.create(record)
        for _ in range(20):  # cancel writes while they wait for the writer thread
            task = asyncio.create_task(store.update(record))
            await asyncio.sleep(0)
            task.cancel()
        record.status = "completed"
        await asyncio.wait_for(store.update(record), timeout=5)
        got = await store.get("r")
        assert got is not None and got.status == "completed"
    finally:
        await store.aclose()
