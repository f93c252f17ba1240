"""A response's log always ends with a terminal: how the service ends one when the writer's own terminal cannot.

The writer writes the terminal of a response it runs. This module covers the rest: a terminal batch held up by a
store outage (retried for about a lease, :func:`flush_terminal`), a writer whose terminal batch was lost to a store
error (:func:`end_response`), and a response generating on another gateway instance (cancelled through its log:
:func:`end_log` appends the terminal, and that instance's writer stops at its next refused append).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Container

from respstream.server.events.dialects import get_dialect
from respstream.server.events.writer import ResponseDeleted, ResponseWriter
from respstream.server.store.base import ResponseRecord, SequenceConflict, Store, StoreUnavailable

__all__ = ["TERMINAL_STATUSES", "end_log", "end_response", "flush_terminal"]

log = logging.getLogger("respstream.server")

TERMINAL_STATUSES = frozenset({"completed", "incomplete", "failed", "cancelled"})


async def flush_terminal(writer: ResponseWriter, lease_seconds: float) -> None:
    """Keep trying to append what the writer holds (its terminal last) while the store is down, for about a
    lease: if the store comes back in time, readers get our terminal; if not, the lease has run out and the
    first reader to notice ends the log with ``worker_lost`` (our late append then gets SequenceConflict)."""
    deadline = time.monotonic() + lease_seconds * 1.5
    pause = 0.05
    while True:
        try:
            await writer.flush()
            return
        except (SequenceConflict, ResponseDeleted):
            writer.abandon()  # someone else ended or deleted the log meanwhile
            return
        except StoreUnavailable:
            if time.monotonic() > deadline:
                log.warning("response %s: the store stayed unavailable; its log ends when the lease expires",
                            writer.record.id)
                return
        await asyncio.sleep(pause)
        pause = min(pause * 2, 1.0)


async def end_response(writer: ResponseWriter, store: Store, code: str, message: str, lease_seconds: float) -> None:
    """End the log with ``code`` whatever state the writer is in: through it while it is open; when its own
    terminal batch was lost to a store error, by appending a terminal after what the log really holds."""
    if not writer.closed:
        writer.fail(code, message)
        try:
            await flush_terminal(writer, lease_seconds)
            return
        except Exception:
            log.exception("response %s: its terminal could not be written", writer.record.id)
    with contextlib.suppress(Exception):
        await end_log(store, writer.record.id, code, message, record=writer.record)


async def end_log(target: Store, response_id: str, code: str, message: str, *,
                  record: ResponseRecord | None = None, running: Container[str] = ()) -> None:
    """Append an error terminal after the last event of an unfinished log (no-op if it ended or is gone). For
    a response generating elsewhere (``record`` None: skipped while it is in ``running``, the responses running
    here) or one whose writer lost its own terminal (``record`` given). Raises ``StoreUnavailable``."""
    for _ in range(8):  # only loops while another writer keeps appending between our read and write
        found = await target.get(response_id)
        if found is None or (found.status in TERMINAL_STATUSES and record is None):
            return
        if record is None and response_id in running:
            return
        last = -1
        while batch := await target.read(response_id, last, limit=1000):
            last = batch[-1].sequence_number
            if batch[-1].terminal:
                return
        writer = ResponseWriter.continuing(record or found, dialect=get_dialect(found.dialect), store=target,
                                           next_sequence_number=last + 1)
        writer.fail(code, message)
        entries = writer.take_pending()
        try:
            await target.append(response_id, entries)
        except SequenceConflict:
            continue
        except KeyError:
            return  # deleted meanwhile
        writer.record.response = writer.response
        await target.update(writer.record)
        return
