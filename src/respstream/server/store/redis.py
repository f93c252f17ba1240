"""The Redis store: many gateway instances share logs, a reader resumes on any of them, a crash ends no reader.

How this works:
- Each response is a record hash, a Redis Stream for its log (entry ids ``0-<seq+1>``) and a lease key, all under
  one hash tag (redis_keys.py). A batch is one ``EVALSHA`` of ``redis_scripts.APPEND`` (one round trip, checked as a
  whole before anything is written: duplicates and appends after the terminal are refused). A log that lost entries
  it had acknowledged (a failover) is repaired from this instance's recent appends (redis_resend.py).
- Reading and tailing (one blocking ``XREAD`` per response per process) are in redis_tail.py; leases and the ending
  of lost logs with ``worker_lost`` in redis_leases.py; conversations in redis_conversations.py.
- Every key gets the retention as TTL (the log inherits the record's remaining TTL on each append); ``expire()``
  additionally deletes by ``created_at`` and ends lost logs nobody is reading.
- Redis down: every call raises ``StoreUnavailable`` within the socket timeouts (connect 1 s, commands 2 s);
  redis-py reconnects on the next call once it is back (redis_io.py, redis_client.py).
- Redis Cluster (``redis+cluster://host:port,host:port``): the key layout (``redis_keys.py``) puts every key of a
  response under one hash tag and never mixes an index key with a response key in one script or transaction, so the
  same code runs on standalone Redis and on a cluster; the cluster client follows ``MOVED``/``ASK`` and a failover
  (a command during one raises ``StoreUnavailable`` until a replica has taken over).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec

from respstream.server.store import redis_scripts as lua
from respstream.server.store.base import LogEntry, ResponseRecord, SequenceConflict, SequenceGap, StoreUnavailable
from respstream.server.store.redis_client import COMMAND_CONNECTIONS, open_clients
from respstream.server.store.redis_conversations import RedisConversations
from respstream.server.store.redis_io import bounded, guard
from respstream.server.store.redis_keys import RedisKeys
from respstream.server.store.redis_resend import ResendBuffer
from respstream.server.store.redis_tail import RedisTail
from respstream.server.store.redis_watch import StreamWatch

__all__ = ["RedisStore"]

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(ResponseRecord).decode
logger = logging.getLogger(__name__)


class RedisStore(RedisTail, RedisConversations):
    """Event logs in Redis Streams. ``instance_id`` names this gateway instance as a lease holder.

    Raises ``StoreUnavailable`` from every method when Redis cannot be reached.
    """

    def __init__(
        self,
        url: str,
        *,
        instance_id: str | None = None,
        lease_seconds: float = 10.0,
        retention_seconds: float = 86400,
        history_limit: int | None = None,
        prefix: str = "respstream:",
        max_tails: int = 10_000,
        resend_entries: int = 256,
        resend_max_bytes: int = 64 << 20,
    ) -> None:
        self.instance_id = instance_id or uuid.uuid4().hex
        self.lease_seconds = lease_seconds
        self.retention_seconds = retention_seconds
        self.history_limit = history_limit
        self.prefix = prefix
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._block_ms = max(20, self._lease_ms // 2)
        self.k = RedisKeys(prefix)
        # Commands share a bounded pool; every tail blocked in XREAD holds a connection of its own, up to
        # `max_tails`; their socket timeout must exceed the block time (half a lease).
        self._r, self._rb, self.cluster = open_clients(url, block_ms=self._block_ms, max_tails=max_tails)
        self._closed = False
        # A plain Redis pool waits for a free connection by itself (redis_client.py).
        self._calls: contextlib.AbstractAsyncContextManager[Any] = (
            asyncio.Semaphore(COMMAND_CONNECTIONS) if self.cluster else contextlib.nullcontext())
        self._watches: dict[str, StreamWatch] = {}
        # Our last `resend_entries` acknowledged entries per unfinished response: a failover that lost them is
        # repaired by resending them (see redis_resend.py). `resent` counts the entries resent so.
        self._resend = ResendBuffer(resend_entries, resend_max_bytes, max_tails)
        self.resent = 0
        self._append = self._r.register_script(lua.APPEND)
        self._delete = self._r.register_script(lua.DELETE)
        self._update = self._r.register_script(lua.UPDATE)
        self._take = self._r.register_script(lua.TAKE)
        self._renew = self._r.register_script(lua.RENEW)
        self._release = self._r.register_script(lua.RELEASE)

    @contextlib.asynccontextmanager
    async def _io(self) -> AsyncIterator[None]:
        """One call on the command client: at most ``COMMAND_CONNECTIONS`` at once on a cluster, whose pool raises
        instead of waiting when a node's connections are all in use (hundreds of readers resuming at once)."""
        async with self._calls:
            with self._guarded():
                yield

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        if self._closed:  # a closed client would quietly reconnect; a closed store must not
            raise StoreUnavailable("the Redis store is closed")
        with guard():
            yield

    # --- keys -----------------------------------------------------------------------------------------------------

    def _keys(self, response_id: str) -> tuple[str, str, str]:
        keys = self.k.response(response_id)
        return keys.rec, keys.log, keys.lease

    # --- records --------------------------------------------------------------------------------------------------

    async def create(self, record: ResponseRecord) -> None:
        rec, _, _ = self._keys(record.id)
        ttl = int(self.retention_seconds * 1000)
        async with self._io():
            # The indexes first (a crash in between leaves an index member without a record, which every index
            # reader skips), then the record in one transaction on its own slot.
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zadd(self.k.by_age, {record.id: record.created_at})
                if record.instance_id is not None:
                    pipe.sadd(self.k.instance(record.instance_id), record.id)
                    pipe.pexpire(self.k.instance(record.instance_id), ttl)
                await pipe.execute()
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(rec)
                pipe.hset(rec, mapping={"json": _encode(record), "last": -1})
                pipe.pexpire(rec, ttl)
                await pipe.execute()

    async def get(self, response_id: str) -> ResponseRecord | None:
        async with self._io():
            data = await self._r.hget(self._keys(response_id)[0], "json")
        return None if data is None else _decode_record(data)

    async def update(self, record: ResponseRecord) -> None:
        """Replace the record; a no-op when it was deleted meanwhile."""
        async with self._io():
            await self._update(keys=[self._keys(record.id)[0]], args=[_encode(record)])

    async def delete(self, response_id: str) -> bool:
        self._resend.forget(response_id)
        async with self._io():
            existed = await self._delete(keys=list(self._keys(response_id)))
            await self._r.zrem(self.k.by_age, response_id)
        return bool(existed)

    # --- the log --------------------------------------------------------------------------------------------------

    async def _run_append(self, response_id: str, entries: list[LogEntry], mode: str = "append",
                          expect_last: int = -1, record_json: bytes = b"") -> str:
        args: list[Any] = [mode, expect_last, record_json, response_id]
        for e in entries:
            args += [e.sequence_number, e.type, e.data, "1" if e.terminal else "0"]
        async with self._io():
            # Bounded: during a cluster failover redis-py's retries could otherwise keep a writer waiting for good.
            result = await bounded(self._append(keys=list(self._keys(response_id)), args=args))
            if result == b"ok" and entries[-1].terminal:  # ended: no longer a candidate for lost-log checks
                await self._r.srem(self.k.leased, response_id)
        return result.decode() if isinstance(result, bytes) else str(result)

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        if not entries:
            return
        result = await self._run_append(response_id, entries)
        if result.startswith("gap:"):
            result = await self._resend_lost_tail(response_id, entries, int(result[4:]))
        if result == "ok":
            self._resend.remember(response_id, entries)
            return
        if result == "missing":
            raise KeyError(response_id)
        if result == "ended":
            self._resend.forget(response_id)  # ended by someone else (worker_lost, a cancel): nothing to resend
            raise SequenceConflict(f"response {response_id}: the log has already ended")
        if result == "dup":
            raise SequenceConflict(
                f"response {response_id}: sequence numbers {entries[0].sequence_number}.."
                f"{entries[-1].sequence_number} are not consecutive after the last one in the log"
            )

    async def _resend_lost_tail(self, response_id: str, entries: list[LogEntry], last: int) -> str:
        """The log ends at ``last`` although we had appended past it (it lost a tail in a failover): append the
        lost entries again from our buffer, then ``entries``, in one script call. Raises ``SequenceGap`` when the
        buffer no longer holds all of them (or the log lost a tail again meanwhile)."""
        start = next(e.sequence_number for e in entries if e.sequence_number > last)
        lost = self._resend.missing(response_id, last, start)
        if lost is None:
            raise SequenceGap(
                f"response {response_id}: the log ends at sequence number {last} but this append starts at {start}:"
                f" it lost {start - last - 1} acknowledged entries (a Redis failover to a replica that had not"
                f" received them?) and this instance no longer holds them all to resend (redis_resend_entries,"
                f" redis_resend_max_bytes)",
                last + 1)
        logger.warning("response %s: the Redis log lost sequence numbers %d..%d (failover?); resending them",
                    response_id, last + 1, start - 1)
        result = await self._run_append(response_id, lost + entries)
        if result.startswith("gap:"):
            raise SequenceGap(f"response {response_id}: the log lost entries again while they were resent",
                              int(result[4:]) + 1)
        if result == "ok":
            self.resent += len(lost)
        return result

    # --- retention, closing ---------------------------------------------------------------------------------------

    async def expire(self, now: float | None = None) -> int:
        cutoff = (time.time() if now is None else now) - self.retention_seconds
        async with self._io():
            old: list[bytes] = await self._r.zrangebyscore(self.k.by_age, "-inf", f"({cutoff}")  # type: ignore[assignment]
            leased: set[bytes] = await self._r.smembers(self.k.leased)  # type: ignore[assignment]
        deleted = 0
        for raw in old:
            deleted += await self.delete(raw.decode())
        await self.expire_conversations(cutoff)
        for raw in leased:
            await self._end_if_lost(raw.decode())
            exists, term = await self._state(raw.decode())
            if not exists or term is not None:
                async with self._io():
                    await self._r.srem(self.k.leased, raw)
        return deleted

    async def aclose(self) -> None:
        self._closed = True
        for watch in list(self._watches.values()):
            watch.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch.task
        await self._r.aclose()
        await self._rb.aclose()
