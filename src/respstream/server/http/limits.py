"""Per-key rate limit (token bucket) and the concurrent-stream gate.

Both answer before any work starts: a refused request gets ``429`` with ``Retry-After`` (rate) or ``503`` with
``Retry-After`` (too many open streams), with the error envelope.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

__all__ = ["RateLimiter", "StreamGate"]


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """``per_minute`` requests per key, bursting to ``burst``. ``per_minute == 0`` disables it."""

    def __init__(self, per_minute: float, burst: int = 0, *, max_keys: int = 100_000) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst or max(1, math.ceil(per_minute)))
        self._buckets: dict[str, _Bucket] = {}
        self._max_keys = max_keys

    def check(self, key: str, now: float | None = None) -> float | None:
        """Take one token for ``key``: None when allowed, else seconds until a token is free."""
        if self.rate <= 0:
            return None
        now = time.monotonic() if now is None else now
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._buckets.clear()  # bounded memory beats exactness for a flood of distinct keys
            bucket = self._buckets[key] = _Bucket(self.burst, now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / self.rate


class StreamGate:
    """Counts open streams; ``try_enter`` refuses past ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def try_enter(self) -> bool:
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def leave(self) -> None:
        self.open = max(0, self.open - 1)
