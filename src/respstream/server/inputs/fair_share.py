"""Slots of a shared pool handed out fairly across clients: :class:`FairShare`.

Why: the schema pool was first come, first served, and a check's deadline ran while it waited. Two slow checks of
one client kept both validation processes busy and every other client's valid structured answer failed "took longer
than 5 s" before its check had started (issue 42, X1). Here a freed slot goes to the waiting client with the fewest
slots in use (ties: the one waiting longest), so a client with many waiting checks cannot keep a client with none
out; a lone client may still use every slot. The caller starts its deadline when :meth:`acquire` returns.

A client is a string: the API key's owner when authenticated, the address block otherwise (see :func:`client_of`).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections import deque
from dataclasses import dataclass, field

__all__ = ["FairShare", "PoolBusy", "charge_to", "client_of"]

_MEMORY = 4096  # clients whose last turn is remembered
_client: contextvars.ContextVar[str] = contextvars.ContextVar("respstream_pool_client", default="anonymous")


def charge_to(client: str) -> None:
    """Make ``client`` the one the current request's (and its tasks') pool waits are counted for."""
    _client.set(client)


def client_of() -> str:
    """The client the current request belongs to (``"anonymous"`` outside a request)."""
    return _client.get()


class PoolBusy(Exception):
    """No slot came free within the wait allowed."""


@dataclass
class _Waiter:
    client: str
    order: int
    future: asyncio.Future[None] = field(repr=False)


class FairShare:
    """``capacity`` slots; :meth:`acquire` waits for one (at most ``wait`` seconds), :meth:`release` frees it.

    One instance per event loop (the futures belong to it)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use: dict[str, int] = {}
        self._waiting: dict[str, deque[_Waiter]] = {}
        self._order = itertools.count()
        # When each client was last granted a slot (a counter, oldest first; at most _MEMORY clients remembered): of
        # two clients with as many slots, the one served longer ago goes first, so a client that holds nothing and
        # was never served is not queued behind the waiters of many clients that each just had their turn.
        self._served: dict[str, int] = {}

    @property
    def busy(self) -> int:
        return sum(self.in_use.values())

    async def acquire(self, client: str, wait: float) -> None:
        """Take a slot for ``client``. Raises :class:`PoolBusy` after ``wait`` seconds without one."""
        if self.busy < self.capacity and not self._waiting:
            self._take(client)
            return
        waiter = _Waiter(client, next(self._order), asyncio.get_running_loop().create_future())
        self._waiting.setdefault(client, deque()).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), wait)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(client)  # granted in the same instant it gave up: hand the slot on
            else:
                waiter.future.cancel()
                self._forget(waiter)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise PoolBusy(f"no slot came free within {wait:g} s") from None

    def release(self, client: str) -> None:
        """Free a slot of ``client`` and grant it to the next waiter (fewest slots in use, then longest waiting)."""
        left = self.in_use.get(client, 0) - 1
        if left > 0:
            self.in_use[client] = left
        else:
            self.in_use.pop(client, None)
        while self.busy < self.capacity and self._waiting:
            chosen = min(self._waiting, key=lambda c: (self.in_use.get(c, 0), self._served.get(c, -1),
                                                        self._waiting[c][0].order))
            queue = self._waiting[chosen]
            waiter = queue.popleft()
            if not queue:
                del self._waiting[chosen]
            if waiter.future.done():
                continue  # gave up already
            self._take(chosen)
            waiter.future.set_result(None)

    def _take(self, client: str) -> None:
        self.in_use[client] = self.in_use.get(client, 0) + 1
        self._served.pop(client, None)
        self._served[client] = next(self._order)
        if len(self._served) > _MEMORY:
            del self._served[next(iter(self._served))]

    def _forget(self, waiter: _Waiter) -> None:
        queue = self._waiting.get(waiter.client)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[waiter.client]
