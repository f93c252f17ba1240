"""The deferred-work queue (store/deferred_queue.py) on Redis, shared by every gateway instance on it.

Four keys with one hash tag (``{q}``, so each script touches one Redis Cluster slot): a sorted set of item ids by
deadline (the take order), one by enqueue time (the oldest wait), a hash of the items' JSON, and a hash of leases
(``holder`` and expiry in ms). Take, renew and remove are scripts reading Redis's own clock (``TIME``), so instances
with different clocks agree on whose lease ran out. A take scans the deadline order from the front and skips held
items (at most instances x concurrency of them), so it costs O(log n + held).
"""

from __future__ import annotations

from typing import Any

import redis

from respstream.server.store.base import StoreUnavailable
from respstream.server.store.deferred_queue import QueuedWork, QueueStats, decode_work, encode_work
from respstream.server.store.redis_client import open_clients

__all__ = ["RedisDeferredQueue"]

_NOW = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
_HELD = ("local function held(lease, now) if not lease then return false end "
         "local sep = string.find(lease, '\\n', 1, true) return tonumber(string.sub(lease, sep + 1)) > now end\n")

# KEYS: by_deadline, work, leases. ARGV: holder, lease_ms, due_by (score or "+inf").
_TAKE = _NOW + _HELD + """
local start = 0
while true do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'LIMIT', start, 64)
  if #ids == 0 then return false end
  for _, id in ipairs(ids) do
    if not held(redis.call('HGET', KEYS[3], id), now) then
      local work = redis.call('HGET', KEYS[2], id)
      if work then
        redis.call('HSET', KEYS[3], id, ARGV[1] .. '\\n' .. (now + tonumber(ARGV[2])))
        return work
      end
    end
  end
  start = start + 64
end
"""
# KEYS: work, leases. ARGV: id, holder, lease_ms.
_RENEW = _NOW + """
local lease = redis.call('HGET', KEYS[2], ARGV[1])
if not lease or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local sep = string.find(lease, '\\n', 1, true)
if string.sub(lease, 1, sep - 1) ~= ARGV[2] or tonumber(string.sub(lease, sep + 1)) <= now then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. '\\n' .. (now + tonumber(ARGV[3])))
return 1
"""
# KEYS: by_deadline, by_enqueue, work, leases. ARGV: id, only_waiting (1/0).
_REMOVE = _NOW + _HELD + """
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then return 0 end
if ARGV[2] == '1' and held(redis.call('HGET', KEYS[4], ARGV[1]), now) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1]) redis.call('HDEL', KEYS[4], ARGV[1])
return 1
"""
# KEYS: by_deadline, by_enqueue, leases. -> {waiting, taken, oldest enqueue ms-score or -1, nearest deadline or -1,
# now ms}: the first unheld member of each order.
_STATS = _NOW + _HELD + """
local taken = 0
local leases = redis.call('HGETALL', KEYS[3])
for i = 2, #leases, 2 do if held(leases[i], now) then taken = taken + 1 end end
local function first_free(key)
  local start = 0
  while true do
    local rows = redis.call('ZRANGE', KEYS[key], start, start + 63, 'WITHSCORES')
    if #rows == 0 then return '-1' end
    for i = 1, #rows, 2 do
      if not held(redis.call('HGET', KEYS[3], rows[i]), now) then return rows[i + 1] end
    end
    start = start + 64
  end
end
return {redis.call('ZCARD', KEYS[1]) - taken, taken, first_free(2), first_free(1), tostring(now)}
"""


class RedisDeferredQueue:
    def __init__(self, url: str, prefix: str = "respstream:") -> None:
        self._r, self._blocking, _ = open_clients(url, block_ms=1000, max_tails=1)
        tag = f"{prefix}{{q}}:deferred:"
        self.by_deadline, self.by_enqueue, self.work, self.leases = (
            f"{tag}by_deadline", f"{tag}by_enqueue", f"{tag}work", f"{tag}leases")
        self._take = self._r.register_script(_TAKE)
        self._renew = self._r.register_script(_RENEW)
        self._remove = self._r.register_script(_REMOVE)
        self._stats = self._r.register_script(_STATS)

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"deferred queue (Redis): {exc}") from exc

    async def put(self, work: QueuedWork) -> None:
        try:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(self.work, work.response_id, encode_work(work))
                pipe.zadd(self.by_deadline, {work.response_id: work.deadline})
                pipe.zadd(self.by_enqueue, {work.response_id: work.enqueued_at})
                await pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"deferred queue (Redis): {exc}") from exc

    async def take(self, holder: str, lease_seconds: float, now: float, due_by: float | None = None
                   ) -> QueuedWork | None:
        found = await self._call(self._take, [self.by_deadline, self.work, self.leases],
                                 [holder, int(lease_seconds * 1000), "+inf" if due_by is None else repr(due_by)])
        return decode_work(found) if found else None

    async def renew(self, response_id: str, holder: str, lease_seconds: float, now: float) -> bool:
        return bool(await self._call(self._renew, [self.work, self.leases],
                                     [response_id, holder, int(lease_seconds * 1000)]))

    async def done(self, response_id: str) -> None:
        await self._call(self._remove, [self.by_deadline, self.by_enqueue, self.work, self.leases], [response_id, 0])

    async def remove_waiting(self, response_id: str, now: float) -> bool:
        return bool(await self._call(self._remove, [self.by_deadline, self.by_enqueue, self.work, self.leases],
                                     [response_id, 1]))

    async def stats(self, now: float) -> QueueStats:
        waiting, taken, oldest, nearest, server_now = await self._call(
            self._stats, [self.by_deadline, self.by_enqueue, self.leases], [])
        clock = int(server_now) / 1000
        oldest_at, nearest_at = float(oldest), float(nearest)
        return QueueStats(waiting=int(waiting), taken=int(taken),
                          oldest_wait=clock - oldest_at if oldest_at >= 0 else 0.0,
                          least_slack=nearest_at - clock if nearest_at >= 0 else None)

    async def aclose(self) -> None:
        for client in (self._r, self._blocking):
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()
