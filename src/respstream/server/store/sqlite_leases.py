"""Leases in the SQLite store (a mixin of :class:`~respstream.server.store.sqlite.SQLiteStore`), and ending the
logs whose generator is gone.

How this works: the lease lives in the response's row of ``responses`` (sqlite_log.py): ``lease_owner`` the holder's
instance id, ``lease_until`` when it runs out (0 once released). ``hold_lease`` sets both, renews ``lease_until``
every third of a lease while its block runs, and releases on exit. A log that is leased, past ``lease_until`` and
unfinished is lost: :func:`end_if_lost` ends it with ``worker_lost`` (a tail that finds it idle, ``expire()``), and
:func:`end_log` ends an unfinished log whatever its lease (``recover()`` at startup). Both are writer jobs that
re-check inside the transaction, so exactly one terminal is written, at last + 1, however many notice at once.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import msgspec

from respstream.server.store.base import ResponseRecord, StoreUnavailable
from respstream.server.store.lease import lost_record, renewing, worker_lost_entries
from respstream.server.store.sqlite_log import append_rows, event_rows

__all__ = ["SQLiteLeases", "end_if_lost", "end_log"]

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(ResponseRecord).decode


class SQLiteLeases:
    instance_id: str
    lease_seconds: float

    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    def _notify(self, response_id: str) -> None:
        raise NotImplementedError

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
                end_log(conn, rid)
            return ids

        ended = await self._write(job)
        for rid in ended:
            self._notify(rid)
        return len(ended)


# --- jobs (run on the writer thread) ---------------------------------------------------------------------------------


def end_log(conn: sqlite3.Connection, response_id: str) -> bool:
    """Append ``worker_lost`` and mark the record failed, if the log is still open. Runs inside the transaction."""
    row = conn.execute("SELECT record, last_seq, ended FROM responses WHERE id = ?", (response_id,)).fetchone()
    if row is None or row[2]:
        return False
    record = _decode_record(row[0])
    append_rows(conn, response_id, event_rows(response_id, worker_lost_entries(record, row[1] + 1)))
    conn.execute("UPDATE responses SET record = ? WHERE id = ?", (_encode(lost_record(record)), response_id))
    return True


def end_if_lost(conn: sqlite3.Connection, response_id: str, now: float) -> bool:
    """:func:`end_log` when the log is leased, unfinished and its lease ran out before ``now``."""
    row = conn.execute("SELECT lease_until FROM responses WHERE id = ? AND ended = 0", (response_id,)).fetchone()
    if row is None or row[0] is None or row[0] >= now:
        return False  # finished, never leased, or renewed meanwhile
    return end_log(conn, response_id)
