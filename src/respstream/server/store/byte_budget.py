"""Bytes held by many holders together, bounded per holder and in total: :class:`ByteBudget`.

Why: a limit per object (a WebSocket's own store, its queue of messages) bounds one object, not how many of them a
client opens. 59 sockets of one key, each with its own store of ``store: false`` responses, reached 4 GB; 1,000
sockets with 16 queued messages of 1 MiB each could hold 16 GB. One budget per resource, shared by every socket of
the process, charged per holder (an API key, a connection), makes the total a number an operator chose.

Sans-IO and synchronous (one event loop owns it): :meth:`take` says whether ``n`` more bytes fit and charges them
only if they do; :meth:`adjust` charges or gives back what was already spent (a log that grew, a store closed).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

__all__ = ["ByteBudget"]


class ByteBudget:
    """``total`` bytes for everyone together, ``per_holder`` bytes for one holder."""

    __slots__ = ("_held", "outside", "per_holder", "total", "used")

    def __init__(self, *, total: int, per_holder: int, outside: Callable[[], int] | None = None) -> None:
        self.total = total
        self.per_holder = per_holder
        self.used = 0
        # Bytes counted against ``total`` that are held elsewhere (the gateway's own memory store shares its
        # budget with the WebSocket stores): read at each check, never charged here.
        self.outside = outside
        self._held: dict[Hashable, int] = {}

    def _total_used(self) -> int:
        return self.used + (self.outside() if self.outside is not None else 0)

    def held(self, holder: Hashable) -> int:
        return self._held.get(holder, 0)

    def room(self, holder: Hashable) -> int:
        """Bytes ``holder`` may still take (0 or more)."""
        return max(0, min(self.per_holder - self.held(holder), self.total - self._total_used()))

    def refusal(self, holder: Hashable, n: int) -> str | None:
        """None when ``n`` more bytes fit; else which limit they would break: ``"holder"`` or ``"total"``."""
        if self.held(holder) + n > self.per_holder:
            return "holder"
        if self._total_used() + n > self.total:
            return "total"
        return None

    def take(self, holder: Hashable, n: int) -> str | None:
        """Charge ``n`` bytes to ``holder`` if they fit (then None); else charge nothing and say which limit."""
        refused = self.refusal(holder, n)
        if refused is None:
            self.adjust(holder, n)
        return refused

    def adjust(self, holder: Hashable, n: int) -> None:
        """Charge ``n`` bytes (negative: give back) without a check: bytes already spent must be counted."""
        if not n:
            return
        left = self._held.get(holder, 0) + n
        if left > 0:
            self._held[holder] = left
        else:
            self._held.pop(holder, None)
        self.used += n
