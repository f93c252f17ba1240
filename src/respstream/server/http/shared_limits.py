"""Rate limits and the open-stream budget shared by every gateway instance on one Redis (or Redis Cluster) store.

Why: behind a balancer, N instances with a per-process limit let a key through N times as fast, and N x
``max_concurrent_streams`` streams open. With the store on Redis these limits are kept in Redis instead, each check
one atomic Lua script (no read-then-write race between instances):

- rate (``rate_limit_per_minute`` / ``rate_limit_burst``, per API key or client address): a token bucket in a hash
  ``{l:rate:<key>}`` (tokens, stamp), refilled from Redis' own clock (``TIME``), so instance clocks do not matter;
  it expires once full again.
- open streams (``shared_max_concurrent_streams``, 0 = off): a hash of open-stream counts per instance and a hash of
  when each instance last reported. An instance counts only while it reported within ``lease_seconds``, so a killed
  instance's streams stop counting after one lease. An instance always writes its absolute count (never +1/-1),
  one write at a time (an ``asyncio.Lock`` orders them), and rewrites it every lease/3 (the heartbeat), so a write
  lost to a network error is repaired by the next one.

Redis unavailable: a check fails open (the request is served, the local per-process limits still hold) and the
failure is logged once per minute: a limiter outage must not become a gateway outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from redis.exceptions import RedisError

from respstream.server.store.redis_client import open_clients
from respstream.server.store.redis_keys import RedisKeys

__all__ = ["SharedLimits"]

log = logging.getLogger("respstream.server")

# KEYS bucket. ARGV rate per second, burst. Returns 0 when a token was taken, else ms until one is free.
_TAKE_TOKEN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate, burst = tonumber(ARGV[1]) / 1000, tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens, stamp = tonumber(b[1] or burst), tonumber(b[2] or now)
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) / rate) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1000)
return wait
"""

# KEYS counts, seen. ARGV instance, limit, lease_ms, op, count. The count is always this instance's absolute number
# of open streams: op "enter" sets it only if every live instance's count together stays within the limit (returns
# 0 otherwise); "set" sets it unconditionally (leave, heartbeat). Instances silent for a lease are dropped.
_STREAMS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, limit, lease, op, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
if op == 'enter' then
  local seen = redis.call('HGETALL', KEYS[2])
  local total = count
  for i = 1, #seen, 2 do
    if now - tonumber(seen[i + 1]) > lease then
      redis.call('HDEL', KEYS[2], seen[i])
      redis.call('HDEL', KEYS[1], seen[i])
    elseif seen[i] ~= me then
      total = total + tonumber(redis.call('HGET', KEYS[1], seen[i]) or '0')
    end
  end
  if total > limit then return 0 end
end
redis.call('HSET', KEYS[1], me, count)
redis.call('HSET', KEYS[2], me, now)
redis.call('PEXPIRE', KEYS[1], lease * 10)
redis.call('PEXPIRE', KEYS[2], lease * 10)
return 1
"""


class SharedLimits:
    """The shared limiter of one gateway instance."""

    def __init__(self, url: str, *, instance_id: str, per_minute: float, burst: int, max_streams: int,
                 lease_seconds: float, prefix: str = "respstream:") -> None:
        self.instance_id = instance_id
        self.rate = per_minute / 60.0
        self.burst = burst or max(1, math.ceil(per_minute))
        self.max_streams = max_streams
        self.lease_ms = max(100, int(lease_seconds * 1000))
        self.open = 0  # streams this instance holds in the shared budget
        self._lock = asyncio.Lock()
        keys = RedisKeys(prefix)
        self._rate_key = keys.rate_bucket
        self._counts, self._seen = keys.stream_budget()
        self._r, self._rb, _ = open_clients(url, block_ms=100, max_tails=1)
        self._take = self._r.register_script(_TAKE_TOKEN)
        self._streams = self._r.register_script(_STREAMS)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._warned_at = -math.inf

    def _unavailable(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at > 60:
            self._warned_at = now
            log.warning("shared limits: Redis unavailable (%s); checking per instance only until it is back", exc)

    async def check_rate(self, key: str) -> float | None:
        """Take one token for ``key`` across all instances: None when allowed, else seconds to wait."""
        if self.rate <= 0:
            return None
        try:
            wait_ms = int(await self._take(keys=[self._rate_key(key)], args=[self.rate, self.burst]))
        except (RedisError, OSError) as exc:
            self._unavailable(exc)
            return None
        return None if wait_ms <= 0 else wait_ms / 1000

    async def _write(self, op: str, count: int) -> bool:
        """One ordered write of our count (see ``_STREAMS``). Raises ``RedisError``/``OSError``."""
        return bool(await self._streams(keys=[self._counts, self._seen],
                                        args=[self.instance_id, self.max_streams, self.lease_ms, op, count]))

    async def enter_stream(self) -> bool:
        """One more open stream in the shared budget; False when every instance together is at the limit."""
        if self.max_streams <= 0:
            return True
        self._start_heartbeat()
        async with self._lock:
            try:
                ok = await self._write("enter", self.open + 1)
            except (RedisError, OSError) as exc:
                self._unavailable(exc)
                ok = True  # fail open; the next heartbeat reports the real count
            if ok:
                self.open += 1
        return ok

    def leave_stream(self) -> None:
        """A stream closed (called from a sync close callback: the write runs in the background)."""
        if self.max_streams <= 0:
            return
        self.open = max(0, self.open - 1)
        task = asyncio.get_running_loop().create_task(self._report())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _report(self) -> None:
        async with self._lock:
            try:
                await self._write("set", self.open)
            except (RedisError, OSError) as exc:
                self._unavailable(exc)

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            await self._report()

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.max_streams > 0:  # leave the budget now rather than after a lease
            self.open = 0
            with contextlib.suppress(RedisError, OSError):
                await self._write("set", 0)
        await self._r.aclose()
        await self._rb.aclose()
