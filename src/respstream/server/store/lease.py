"""What a store writes when a generator is gone: the terminal ``worker_lost`` events, and a lease renewer.

Only the writer (events/writer.py) shapes events while a response runs; this is the one exception, because when the
writer is dead someone else must end the log. Kept small and dialect-aware so SQLite and Redis end logs identically:

- ``platform``: one terminal ``{"type":"error","sequence_number":N,"code":"worker_lost","message":...,"param":null,
  "error":{...}}`` (the nested copy makes the official SDKs raise; store/error_event.py ``flat_error``).
- ``openai`` and ``openresponses``: the nested ``error`` event (not terminal), then the terminal
  ``response.failed`` carrying the record's Response snapshot with ``status: "failed"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec

from respstream.server.store.base import LogEntry, ResponseRecord
from respstream.server.store.error_event import flat_error

__all__ = ["WORKER_LOST", "WORKER_LOST_MESSAGE", "lost_record", "renewing", "worker_lost_entries"]

WORKER_LOST = "worker_lost"
WORKER_LOST_MESSAGE = "The gateway instance generating this response stopped before finishing it."

_encode = msgspec.json.Encoder().encode
log = logging.getLogger("respstream.server.store")


def _failed_response(record: ResponseRecord, message: str) -> dict[str, Any]:
    response = dict(record.response)
    response.setdefault("id", record.id)
    response.setdefault("object", "response")
    response.setdefault("created_at", record.created_at)
    response.setdefault("output", [])
    response["status"] = "failed"
    response["error"] = {"code": WORKER_LOST, "message": message}  # as server/events/writer.py's fail() shapes it
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
    event = {"type": "error", "sequence_number": next_seq, **flat_error(WORKER_LOST, message)}
    return [LogEntry(next_seq, "error", _encode(event), terminal=True)]


def lost_record(record: ResponseRecord, message: str = WORKER_LOST_MESSAGE) -> ResponseRecord:
    """``record`` marked failed (status and Response snapshot), as a poller should see it after ``worker_lost``."""
    record.status = "failed"
    record.response = _failed_response(record, message)
    return record


# After a failed renewal, the next attempt comes this soon (doubling up to the interval), not a whole interval later:
# a renewal that failed slowly (a Redis failover: each attempt may take seconds before it gives up) followed by a
# full interval of sleep would let the lease run out on a healthy generator.
_RETRY_FIRST = 0.1


@contextlib.asynccontextmanager
async def renewing(renew: Callable[[], Awaitable[None]], interval: float) -> AsyncIterator[None]:
    """Call ``renew`` every ``interval`` seconds while the block runs.

    A failed renewal (store briefly unavailable) is retried soon with backoff rather than killing generation: if the
    outage outlasts the lease, readers end the log and the writer's next append gets ``SequenceConflict``. Failures
    and the recovery are logged with the time since the last renewal that worked.
    """

    async def loop() -> None:
        pause = interval
        last_ok = time.monotonic()
        failures = 0
        while True:
            await asyncio.sleep(pause)
            try:
                await renew()
            except Exception as exc:
                failures += 1
                if failures == 1:
                    log.warning("lease renewal failed (%s: %s); retrying", type(exc).__name__, exc)
                pause = min(interval, _RETRY_FIRST * 2 ** min(failures - 1, 10))
                continue
            if failures:
                log.warning("lease renewed again after %d failed attempts, %.1f s after the last renewal",
                            failures, time.monotonic() - last_ok)
            failures, pause, last_ok = 0, interval, time.monotonic()

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
