"""``renewing``: a renewal that fails is retried soon (backoff from 0.1 s), not a whole interval later, so a slow
failure (a Redis failover: one attempt may take seconds to give up) does not let a healthy writer's lease run out."""

from __future__ import annotations

import asyncio
import itertools
import time

from respstream.server.store.base import StoreUnavailable
from respstream.server.store.lease import renewing


async def test_a_failed_renewal_is_retried_well_before_the_next_interval() -> None:
    calls: list[float] = []
    start = time.monotonic()

    async def renew() -> None:
        calls.append(time.monotonic() - start)
        if len(calls) == 1:
            await asyncio.sleep(0.3)  # fails slowly, as a command during a failover does
            raise StoreUnavailable("failing over")

    async with renewing(renew, interval=1.0):
        await asyncio.sleep(1.8)
    # first at ~1.0 s, failing at ~1.3 s; the retry ~0.1 s later (not at ~2.3 s)
    assert len(calls) >= 2, calls
    assert calls[1] - calls[0] < 0.8, calls


async def test_renewals_keep_their_interval_while_they_work() -> None:
    calls: list[float] = []

    async def renew() -> None:
        calls.append(time.monotonic())

    async with renewing(renew, interval=0.2):
        await asyncio.sleep(0.9)
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert 3 <= len(calls) <= 5 and all(g >= 0.18 for g in gaps), gaps
