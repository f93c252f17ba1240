"""A byte budget per API key for what its requests put in the store (``limits.store_max_bytes_per_key``).

How this works: every store (memory, SQLite, Redis) deletes a response and an untouched conversation once
``retention_seconds`` have passed, so the bytes a key wrote within the last ``retention_seconds`` bound what it holds
at once. :class:`KeyQuota` counts them per key in one-minute buckets, above the store (the same for every backend):
a new response is charged its stored request (input, base items, parent reference) before it is created, and its
final Response twice (the snapshot and the event log carry the same content) when it ends; conversation items are
charged when added. A request that would pass the budget is refused with 429 ``storage_quota_exceeded`` naming the
limit, before anything is stored; a response already running is never cut (it may overshoot by its own size). The
count is per gateway process: with several instances on one shared store a key may hold up to that many budgets.
``store: false`` responses are not charged (they are deleted once their client has them), a deleted response is not
refunded (its bytes age out of the window), and an open server (no API keys) has no key to count: its store is
bounded by ``memory_store_max_bytes`` and the retention only.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Any

import msgspec

from respstream.server.http_errors import HTTPError

__all__ = ["KeyQuota", "stored_bytes"]

_BUCKET_SECONDS = 60.0
_MAX_KEYS = 100_000  # keys tracked at once (least recently charged forgotten first)


def stored_bytes(value: Any) -> int:
    """The bytes ``value`` takes as the compact JSON the stores keep."""
    return len(msgspec.json.encode(value))


class KeyQuota:
    def __init__(self, max_bytes: int, window_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.window = window_seconds
        self._buckets: OrderedDict[str | None, dict[int, int]] = OrderedDict()

    def used(self, owner: str | None, now: float | None = None) -> int:
        buckets = self._buckets.get(owner)
        if not buckets:
            return 0
        oldest = math.floor(((now or time.time()) - self.window) / _BUCKET_SECONDS)
        for stamp in [s for s in buckets if s < oldest]:
            del buckets[stamp]
        return sum(buckets.values())

    def check(self, owner: str | None, adding: int, now: float | None = None) -> None:
        """Raises 429 when ``adding`` more bytes would pass the key's budget (never without a key)."""
        if owner is None:
            return
        used = self.used(owner, now)
        if used + adding > self.max_bytes:
            raise HTTPError(429, "storage_quota_exceeded",
                            f"This API key has stored {used} bytes in the last {self.window:g} s; {adding} more would "
                            f"pass its budget of {self.max_bytes} bytes (limits.store_max_bytes_per_key). Delete "
                            "responses or conversations, or wait for them to expire.",
                            headers={"Retry-After": str(int(_BUCKET_SECONDS))})

    def charge(self, owner: str | None, n: int, now: float | None = None) -> None:
        if owner is None:
            return
        stamp = math.floor((now or time.time()) / _BUCKET_SECONDS)
        buckets = self._buckets.setdefault(owner, {})
        self._buckets.move_to_end(owner)
        buckets[stamp] = buckets.get(stamp, 0) + n
        while len(self._buckets) > _MAX_KEYS:
            self._buckets.popitem(last=False)
