"""Bytes that ``file_url`` fetches hold, shared by every request: :class:`FetchBudget` (issue 42, H3v).

Why: the per-request caps (``limits.file_urls_per_request``, ``file_urls_max_total_bytes``) bound one request, not
how many of them run at once. 96 concurrent requests, each with 16 parts of 1 MB (each within every cap), grew the
gateway by 2.1 GB: every request held its fetched files (as base64 data URLs, 4/3 of the bytes) until its response
ended. One budget for the whole gateway (``limits.file_urls_inflight_bytes``) and one per API key
(``limits.file_urls_inflight_bytes_per_key``) make the total a number an operator chose.

How: before anything is fetched, a request reserves the most its fetches can hold (:func:`worst_case_bytes`); when
that does not fit it is refused at once (per key: 429, gateway-wide: 503, both with ``Retry-After`` and a message
naming the limit), so no refused request fetched a byte. Once fetched, the reservation is settled to what the data
URLs really take (``sys.getsizeof``, twice: the upstream's encoded request body carries another copy) and held until
the response ends (:meth:`FetchHold.release`). A keyless request has no per-key share: only the gateway's total
bounds it.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable

from respstream.server.inputs.keyed_budget import KeyedBudget
from respstream.server.store.byte_budget import ByteBudget

__all__ = ["FetchBudget", "FetchHold", "held_bytes", "worst_case_bytes"]

_DATA_URL_PREFIX = 64  # "data:<content type>;base64," (a long content type is cut by the fetcher's header caps)


def worst_case_bytes(parts: int, max_bytes: int, max_total_bytes: int) -> int:
    """The most ``parts`` fetches (each at most ``max_bytes``, all at most ``max_total_bytes``) can hold at once:
    the data URLs (base64, 4/3 of the bytes) twice (kept and encoded for the upstream), plus the raw bytes of
    the part being fetched (one at a time)."""
    raw = min(parts * max_bytes, max_total_bytes)
    encoded = 4 * ((raw + 2) // 3) + parts * (_DATA_URL_PREFIX + sys.getsizeof(""))
    return 2 * encoded + min(max_bytes, raw) + sys.getsizeof(b"")


def held_bytes(data_urls: Iterable[str]) -> int:
    """What fetched files take once inlined: each data URL's real size, twice (see :func:`worst_case_bytes`)."""
    return 2 * sum(sys.getsizeof(url) for url in data_urls)


class FetchHold:
    """One request's reservation; :meth:`release` gives it back (idempotent)."""

    __slots__ = ("_budget", "_holder", "bytes")

    def __init__(self, budget: ByteBudget, holder: Hashable, n: int) -> None:
        self._budget, self._holder, self.bytes = budget, holder, n

    def settle(self, n: int) -> None:
        """Charge ``n`` bytes instead of the reservation (what the fetched files really take)."""
        if self.bytes:
            self._budget.adjust(self._holder, n - self.bytes)
            self.bytes = n

    def release(self) -> None:
        if self.bytes:
            self._budget.adjust(self._holder, -self.bytes)
            self.bytes = 0


class FetchBudget(KeyedBudget):
    """``total`` bytes for every request's fetched files together, ``per_key`` for one API key's requests."""

    code = "file_fetch_budget_exceeded"
    key_refusal = ("This API key's requests already hold {held} bytes of fetched input files; this request may "
                   "need {n} more, past the key's {limit} (limits.file_urls_inflight_bytes_per_key). Retry when one "
                   "has finished.")
    total_refusal = ("The gateway's requests already hold {held} bytes of fetched input files; this request may "
                     "need {n} more, past the gateway's {limit} (limits.file_urls_inflight_bytes). Retry shortly.")

    def reserve(self, owner: str | None, n: int) -> FetchHold:
        """Reserve ``n`` bytes for a request of ``owner`` (None: keyless) or raise the refusal (429 / 503)."""
        holder: Hashable = owner if owner is not None else object()
        self.charge(owner, holder, n)
        return FetchHold(self.bytes, holder, n)
