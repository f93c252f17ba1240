"""Leases in the Redis store (a mixin of :class:`~respstream.server.store.redis.RedisStore`), and ending the logs
whose generator is gone.

How this works: the lease is a key of its own beside the response's record and log (``lease`` in redis_keys.py, one
hash tag), holding the holder's instance id with a PX expiry of one lease. ``hold_lease`` adds the response to the
index of leased responses, takes the lease (``redis_scripts.TAKE``, which also marks the record ``leased``), renews
it every third of a lease (``RENEW``) and releases it on exit (``RELEASE``, only if still ours). A log whose record
says ``leased``, whose lease key is gone and which has no terminal is lost: :meth:`RedisLeases._end_if_lost` appends
``worker_lost`` through the append script in ``lost`` mode, which re-checks all of that atomically (and that nothing
was appended since we looked), so however many readers notice at once there is exactly one terminal, at last + 1.
``recover`` ends every unfinished log of an instance (``force`` mode) after a restart.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from respstream.server.store.base import LogEntry, ResponseRecord, StoreUnavailable
from respstream.server.store.lease import lost_record, renewing, worker_lost_entries
from respstream.server.store.redis_io import CALL_BOUND, bounded
from respstream.server.store.redis_keys import RedisKeys

__all__ = ["RedisLeases"]

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(ResponseRecord).decode


class RedisLeases:
    instance_id: str
    lease_seconds: float
    k: RedisKeys
    _lease_ms: int
    _r: Any
    _take: Any  # the registered scripts (redis_scripts.py)
    _renew: Any
    _release: Any

    def _io(self) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError

    def _keys(self, response_id: str) -> tuple[str, str, str]:
        raise NotImplementedError

    async def _run_append(self, response_id: str, entries: list[LogEntry], mode: str = "append",
                          expect_last: int = -1, record_json: bytes = b"") -> str:
        raise NotImplementedError

    async def _state(self, response_id: str) -> tuple[bool, int | None]:
        """(exists, terminal sequence number)."""
        async with self._io():
            term = await self._r.hmget(self._keys(response_id)[0], ["last", "term"])
        return term[0] is not None, None if term[1] is None else int(term[1])

    async def _end_if_lost(self, response_id: str, *, force: bool = False) -> bool:
        """Append ``worker_lost`` when the log is lost (or, with ``force``, merely unfinished). True if we did."""
        rec, _, lease = self._keys(response_id)
        for _ in range(5):  # only loops when the writer moved between our look and the script
            async with self._io(), self._r.pipeline(transaction=False) as pipe:
                pipe.hmget(rec, ["json", "last", "term", "leased"])
                pipe.exists(lease)
                (data, last, term, leased), held = await pipe.execute()
            if data is None or term is not None:
                return False
            if not force and (leased != b"1" or held):
                return False
            record = _decode_record(data)
            seq = int(last) + 1
            entries = worker_lost_entries(record, seq)
            result = await self._run_append(
                response_id, entries, "force" if force else "lost", seq - 1, _encode(lost_record(record))
            )
            if result != "moved":
                return result == "ok"
        return False

    @contextlib.asynccontextmanager
    async def hold_lease(self, response_id: str) -> AsyncIterator[None]:
        """See ``Store.hold_lease``. Raises ``KeyError`` when the response does not exist."""
        rec, _, lease = self._keys(response_id)
        async with self._io():
            await self._r.sadd(self.k.leased, response_id)  # index first: a leased log is always findable
            taken = await self._take(keys=[rec, lease], args=[self.instance_id, self._lease_ms])
        if not taken:
            raise KeyError(response_id)

        async def renew() -> None:  # bounded well inside the lease, so a retry still comes before it runs out
            async with self._io():
                await bounded(self._renew(keys=[rec, lease], args=[self.instance_id, self._lease_ms]),
                               min(CALL_BOUND, self.lease_seconds / 4))

        try:
            async with renewing(renew, self.lease_seconds / 3):
                yield
        finally:
            with contextlib.suppress(StoreUnavailable):
                async with self._io():
                    await self._release(keys=[lease], args=[self.instance_id])

    async def recover(self, instance_id: str) -> int:
        key = self.k.instance(instance_id)
        async with self._io():
            members: set[bytes] = await self._r.smembers(key)
        ended = 0
        for raw in members:
            response_id = raw.decode()
            if await self._end_if_lost(response_id, force=True):
                ended += 1
            async with self._io():
                await self._r.srem(key, response_id)  # finished, ended now, or gone: nothing left to recover
        return ended
