"""Reading a log in the Redis store (a mixin of :class:`~respstream.server.store.redis.RedisStore`): ``read`` and
``tail``.

How this works: a response's log is a Redis Stream whose entry ids are ``0-<seq+1>``, so ``XRANGE``/``XREAD`` from
``0-<after+2>`` resumes exactly after a sequence number, on any instance. ``tail()`` catches up with plain reads on
the shared command pool (one round trip a batch: the record's ``last``/``term`` and the entries); once level with
the writer it waits on the response's :class:`~respstream.server.store.redis_watch.StreamWatch`, one ``XREAD
BLOCK`` per response per process, blocking for at most half a lease. When that times out the watch checks the
record: gone -> stop; leased, lease expired, no terminal -> end the log with ``worker_lost`` (redis_leases.py).
Deleting leaves a tombstone entry (``gone``) so blocked readers wake and stop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from redis.exceptions import ResponseError

from respstream.server.store.base import LogEntry
from respstream.server.store.redis_leases import RedisLeases
from respstream.server.store.redis_watch import StreamWatch

__all__ = ["RedisTail"]

_TAIL_BATCH = 1000


def _entries(raw: list[tuple[bytes, dict[bytes, bytes]]]) -> tuple[list[LogEntry], bool]:
    """Stream entries -> log entries, and whether a deletion tombstone was among them."""
    out: list[LogEntry] = []
    for entry_id, fields in raw:
        if b"gone" in fields:
            return out, True
        seq = int(entry_id.split(b"-", 1)[1]) - 1
        out.append(LogEntry(seq, fields[b"t"].decode(), fields[b"d"], fields[b"x"] == b"1"))
    return out, False


class RedisTail(RedisLeases):
    """Builds on the leases: a tail that finds its log idle ends it when it is lost."""

    _rb: Any  # the client for blocking reads (redis_client.py)
    _block_ms: int
    _watches: dict[str, StreamWatch]

    def _guarded(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        rec, log, _ = self._keys(response_id)
        async with self._io(), self._r.pipeline(transaction=False) as pipe:
            pipe.exists(rec)
            pipe.xrange(log, min=f"0-{after + 2}", max="+", count=limit)
            exists, raw = await pipe.execute()
        if not exists:
            return []
        return _entries(raw)[0]

    async def _step(self, response_id: str, after: int) -> tuple[bool, int | None, list[LogEntry], bool]:
        """One round trip: (exists, terminal seq, entries after ``after``, tombstone seen)."""
        rec, log, _ = self._keys(response_id)
        async with self._io(), self._r.pipeline(transaction=False) as pipe:
            pipe.hmget(rec, ["last", "term"])
            pipe.xrange(log, min=f"0-{after + 2}", max="+", count=_TAIL_BATCH)
            (last, term), raw = await pipe.execute()
        if last is None:  # deleted or expired: the stream may linger a little with its tombstone
            return False, None, [], True
        batch, gone = _entries(raw)
        return True, None if term is None else int(term), batch, gone

    async def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        """See ``Store.tail``. Also ends lost logs (expired lease, no terminal) with ``worker_lost``.

        Catches up with plain reads on the shared pool; readers level with the writer wait on the response's
        ``StreamWatch`` (one blocking ``XREAD`` per response per process).
        """
        last = after
        while True:
            exists, term, batch, gone = await self._step(response_id, last)
            for entry in batch:
                yield entry
                last = entry.sequence_number
                if entry.terminal:
                    return
            if gone or not exists or (term is not None and term <= last):
                return
            if batch:
                continue
            while batch := await self._watch(response_id, last).wait_beyond(last):
                for entry in batch:
                    yield entry
                    last = entry.sequence_number
                    if entry.terminal:
                        return
            # [] : we fell behind the watch's batch, or it ended (terminal, deleted, lost): re-read

    def _watch(self, response_id: str, last: int) -> StreamWatch:
        watch = self._watches.get(response_id)
        if watch is None or watch.done:
            log = self._keys(response_id)[1]

            async def read(top: int) -> tuple[list[LogEntry], bool] | None:
                with self._guarded():  # the blocking client: its own connections, one per blocked read
                    try:
                        reply: Any = await self._rb.xread({log: f"0-{top + 1}"}, count=_TAIL_BATCH,
                                                          block=self._block_ms)
                    except ResponseError as exc:
                        if not str(exc).startswith("UNBLOCKED"):
                            raise
                        return None  # the node changed role under the blocked read (a failover): look again
                return _entries(reply[0][1]) if reply else None

            async def on_idle() -> bool:  # quiet for half a lease: is the log lost, or gone?
                await self._end_if_lost(response_id)
                exists, term = await self._state(response_id)
                # A terminal the blocked read did not deliver sits at or below what it saw: the log lost its tail
                # (a failover) and was ended there. Stop; the readers re-read and see where the log really ends.
                return exists and term is None

            def on_exit(done: StreamWatch) -> None:
                if self._watches.get(response_id) is done:
                    del self._watches[response_id]

            watch = self._watches[response_id] = StreamWatch(read, on_idle, on_exit, last)
        return watch
