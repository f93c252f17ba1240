"""A gateway-wide byte budget with a share per API key, refusing with 429 / 503: :class:`KeyedBudget`.

Why: the fetched-files budget (fetch_budget.py) and the request-memory budget (request_memory.py) charge and refuse
the same way; only their error code and the words of their refusals differ. One charge here keeps the two from
drifting apart (a keyless request bounded by the total only, the per-key refusal a 429 and the total's a 503).
"""

from __future__ import annotations

from collections.abc import Hashable

from respstream.server.http_errors import HTTPError
from respstream.server.store.byte_budget import ByteBudget

__all__ = ["KeyedBudget"]


class KeyedBudget:
    """``total`` bytes for every request together, ``per_key`` for one API key's requests. A subclass names its
    error ``code`` and the two refusal messages (``str.format`` with ``held``, ``n`` and ``limit``)."""

    code: str
    key_refusal: str
    total_refusal: str

    def __init__(self, *, total: int, per_key: int) -> None:
        self.bytes = ByteBudget(total=total, per_holder=per_key)

    def charge(self, owner: str | None, holder: Hashable, n: int) -> None:
        """Charge ``n`` bytes to ``holder`` (a request of ``owner``; None: keyless) or raise the refusal."""
        budget = self.bytes
        if owner is None:  # keyless: no key to share by, the gateway's total only
            refused = "total" if budget.used + n > budget.total else None
            if refused is None:
                budget.adjust(holder, n)
        else:
            refused = budget.take(holder, n)
        if refused == "holder":
            raise HTTPError(429, self.code,
                            self.key_refusal.format(held=budget.held(holder), n=n, limit=budget.per_holder),
                            headers={"Retry-After": "5"})
        if refused == "total":
            raise HTTPError(503, self.code,
                            self.total_refusal.format(held=budget.used, n=n, limit=budget.total),
                            headers={"Retry-After": "2"})
