"""What a store writes when a generator is gone: the terminal ``worker_lost`` events, and a lease renewer.

Only the writer (server/writer.py) shapes events while a response runs; this is the one exception, because when the
writer is dead someone else must end the log. Kept small and dialect-aware so SQLite and Redis end logs identically:

- ``platform``: one terminal ``{"type":"error","sequence_number":N,"code":"worker_lost","message":...,"param":null}``.
- ``openai`` and ``openresponses``: the nested ``error`` event (not terminal), then the terminal
  ``response.failed`` carrying the record's Response snapshot with ``status: "failed"``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec

from respstream.server.store.base import LogEntry, ResponseRecord

__all__ = ["WORKER_LOST", "WORKER_LOST_MESSAGE", "lost_record", "renewing", "worker_lost_entries"]

WORKER_LOST = "worker_lost"
WORKER_LOST_MESSAGE = "The gateway instance generating this response stopped before finishing it."

_encode = msgspec.json.Encoder().encode


def _failed_response(record: ResponseRecord, message: str) -> dict[str, Any]:
    response = dict(record.response)
    response.setdefault("id", record.id)
    response.setdefault("object", "response")
    response.setdefault("created_at", record.created_at)
    response.setdefault("output", [])
    response["status"] = "failed"
    response["error"] = {"code": WORKER_LOST, "message": message}  # as server/writer.py's fail() shapes it
    return response


def worker_lost_entries(record: ResponseRecord, next_seq: int, message: str = WORKER_LOST_MESSAGE) -> list[LogEntry]:
    """The entries that end ``record``'s log after its generator vanished; the first gets ``next_seq``."""
    if record.dialect in ("openai", "openresponses"):  # the dialects with a separate response.failed
        error = {"type": "server_error", "code": WORKER_LOST, "message": message, "param": None}
        failed = {"type": "response.failed", "sequence_number": next_seq + 1,
                  "response": _failed_response(record, message)}
        return [
            LogEntry(next_seq, "error", _encode({"type": "error", "sequence_number": next_seq, "error": error})),
            LogEntry(next_seq + 1, "response.failed", _encode(failed), terminal=True),
        ]
    event = {"type": "error", "sequence_number": next_seq, "code": WORKER_LOST, "message": message, "param": None}
    return [LogEntry(next_seq, "error", _encode(event), terminal=True)]


def lost_record(record: ResponseRecord, message: str = WORKER_LOST_MESSAGE) -> ResponseRecord:
    """``record`` marked failed (status and Response snapshot), as a poller should see it after ``worker_lost``."""
    record.status = "failed"
    record.response = _failed_response(record, message)
    return record


@contextlib.asynccontextmanager
async def renewing(renew: Callable[[], Awaitable[None]], interval: float) -> AsyncIterator[None]:
    """Call ``renew`` every ``interval`` seconds while the block runs.

    A failed renewal (store briefly unavailable) is retried at the next tick rather than killing generation: if the
    outage outlasts the lease, readers end the log and the writer's next append gets ``SequenceConflict``.
    """

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await renew()

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
