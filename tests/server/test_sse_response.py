"""The SSE sender never ends a stream silently: a deleted log or a failing store gives the reader a terminal of
its own (no `id:` line, numbered last + 1), then the stream closes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from respstream.server.events.dialects import get_dialect
from respstream.server.http import sse_response
from respstream.server.http.sse_response import EventStreamResponse
from respstream.server.store.base import LogEntry, ResponseRecord, StoreUnavailable
from respstream.server.store.memory import MemoryStore

from .helpers import decode


def _entry(seq: int) -> LogEntry:
    event = {"type": "response.created", "sequence_number": seq,
             "response": {"id": "r1", "object": "response", "status": "in_progress", "output": []}}
    return LogEntry(seq, "response.created", json.dumps(event).encode())


async def _run(response: EventStreamResponse, *, until: asyncio.Event, after_first: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await until.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) == 2:
            await after_first()

    await asyncio.wait_for(response({"type": "http", "state": {}}, receive, send), timeout=10)
    until.set()
    return sent


@pytest.mark.parametrize("dialect", ["platform", "openai"])
async def test_deleted_log_gets_a_reader_terminal(dialect: str) -> None:
    store = MemoryStore()
    await store.create(ResponseRecord(id="r1", status="in_progress", created_at=0.0))
    await store.append("r1", [_entry(0)])
    response = EventStreamResponse(store=store, response_id="r1", after=-1, dialect=get_dialect(dialect),
                                   keepalive_seconds=5, headers=[])

    async def delete() -> None:
        await store.delete("r1")

    sent = await _run(response, until=asyncio.Event(), after_first=delete)
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    last_frame = body.rstrip(b"\n").split(b"\n\n")[-1]
    assert not last_frame.startswith(b"id:")  # not in the log: a reconnect resumes after the real event 0
    core = decode(body, dialect=dialect)
    assert core.violations == []
    assert core.result.status == "cancelled" and core.last_sequence_number == 1
    assert core.result.error is not None and "deleted" in core.result.error["message"]


class FailingStore:
    """SIMULATED store: one entry, then every read fails as if Redis went away."""

    def __init__(self) -> None:
        self.tails = 0

    async def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        self.tails += 1
        if after < 0:
            yield _entry(0)
        raise StoreUnavailable("Redis is unavailable: connection refused")

    async def get(self, response_id: str) -> ResponseRecord | None:
        raise StoreUnavailable("Redis is unavailable: connection refused")


async def test_failing_store_gives_store_unavailable_after_retrying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse_response, "STORE_RETRY_SECONDS", 0.3)
    store = FailingStore()
    response = EventStreamResponse(store=store, response_id="r1", after=-1,  # type: ignore[arg-type]
                                   dialect=get_dialect("platform"), keepalive_seconds=5, headers=[])

    async def nothing() -> None:
        return None

    sent = await _run(response, until=asyncio.Event(), after_first=nothing)
    body = b"".join(m.get("body", b"") for m in sent[1:])
    core = decode(body, dialect="platform")
    assert core.violations == [] and core.last_sequence_number == 1
    assert core.result.error is not None and core.result.error["code"] == "store_unavailable"
    assert store.tails >= 2  # it retried from the last event sent before giving up
