"""When to try again, and how long to wait first.

Two different retries exist and they must not be confused:

* **Before the stream starts** (the POST, or a resume GET, answered 408/409/429/5xx or could not connect): the request
  is repeated up to ``max_retries`` times. ``Retry-After`` is honoured, capped by ``retry_after_cap``.
* **After bytes of a stream were delivered**: never repeated, except a *background* response, which is resumed with
  ``GET …?starting_after=N`` up to ``max_resume_attempts`` times in a row without progress.

Delays grow exponentially from ``base`` to ``max_delay`` with "equal jitter" (half fixed, half random), so many
clients cut off together do not reconnect in lock-step. The RNG is injectable, so tests are deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["RETRYABLE_STATUS", "RetryPolicy"]

# 408 timeout, 409 lock conflict, 429 rate limit, 5xx server trouble: what the official SDKs also retry.
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass
class RetryPolicy:
    """Backoff settings shared by the sync and async clients.

    ``max_retries``: extra attempts for a request that failed before streaming (0 disables).
    ``max_resume_attempts``: reconnects of a background stream in a row that delivered no new event.
    ``base`` / ``max_delay``: the exponential backoff range in seconds.
    ``retry_after_cap``: the longest ``Retry-After`` we agree to wait; a longer ask fails at once.
    ``rng``: the jitter source; pass ``random.Random(seed)`` for reproducible delays.
    """

    max_retries: int = 2
    max_resume_attempts: int = 5
    base: float = 0.5
    max_delay: float = 8.0
    retry_after_cap: float = 60.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): in ``[d/2, d]``, ``d = min(max, base*2**n)``."""
        ceiling = float(min(self.max_delay, self.base * 2.0 ** max(0, attempt)))
        return ceiling / 2 + self.rng.random() * ceiling / 2

    def delay_for(self, attempt: int, retry_after: float | None) -> float | None:
        """The wait before retry ``attempt``, honouring the server's ``Retry-After``.

        Returns ``None`` when the server asked for longer than ``retry_after_cap``: waiting that long silently
        would look like a hang, so the caller gives up and raises the error instead.
        """
        if retry_after is None:
            return self.delay(attempt)
        if retry_after > self.retry_after_cap:
            return None
        return retry_after

    def should_retry_status(self, status_code: int, attempt: int) -> bool:
        """True if a request that got ``status_code`` before streaming may be sent again (``attempt`` is 0-based)."""
        return attempt < self.max_retries and status_code in RETRYABLE_STATUS
