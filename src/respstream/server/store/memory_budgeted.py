"""A :class:`MemoryStore` whose bytes also count against a :class:`~respstream.server.store.byte_budget.ByteBudget`
shared with other stores: :class:`BudgetedMemoryStore`.

Why: a WebSocket connection keeps its ``store: false`` responses in a memory store of its own (websocket/transport.py),
and each of those stores had its own 256 MiB ``max_bytes``, so 59 sockets of one API key reached 4 GB while
``memory_store_max_bytes`` bounded only the gateway's shared store. Every connection's store now charges one budget:
``websocket_store_max_bytes_per_key`` for one key's sockets together, and ``memory_store_max_bytes`` for all of them
together with the gateway's own memory store (its bytes are read at each check).

How: after each call that changes ``bytes`` (create, update, append, delete, eviction) the difference is charged to
the budget. Bytes are the records' real in-memory size (memory.py: the request kept as compact JSON bytes, the
Response measured object by object), checked against both budgets before the record is stored. ``create`` first
drops this store's own oldest finished responses to make room, then refuses with ``StoreUnavailable`` (the
WebSocket's 503 error event, which names the setting) when the budget still has none.
Appends of a running response are counted but never refused (its log must end): one response is bounded by the
generation itself. ``aclose`` gives everything back.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from respstream.server.store.base import Entry, ResponseRecord, StoreUnavailable
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.store.memory import MemoryStore

__all__ = ["BudgetedMemoryStore"]


class BudgetedMemoryStore(MemoryStore):
    """A memory store charging ``budget`` as ``holder`` (the API key's owner id, or the connection when keyless)."""

    def __init__(self, *, budget: ByteBudget, holder: Hashable, **options: float | int) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.budget = budget
        self.holder = holder
        self._charged = 0
        self._closed = False

    def _settle(self) -> None:
        if not self._closed:
            self.budget.adjust(self.holder, self.bytes - self._charged)
            self._charged = self.bytes

    def _room_for(self, size: int) -> None:
        short = size - self.budget.room(self.holder)
        if short > 0:  # drop this store's oldest finished responses until the new one fits (as far as they go)
            self._evict(room_bytes=short + self._max_bytes - self.bytes)
            self._settle()
        refused = self.budget.refusal(self.holder, size)
        if refused is not None:
            raise StoreUnavailable(
                f"a new response kept in memory needs {size} bytes; WebSocket responses kept in memory " + (
                    f"by this API key's connections hold {self.budget.held(self.holder)} of their "
                    f"{self.budget.per_holder} bytes (websocket_store_max_bytes_per_key)" if refused == "holder" else
                    f"and the memory store hold {self.budget.total - self.budget.room(self.holder)} of "
                    f"{self.budget.total} bytes (memory_store_max_bytes)")
                + "; finish or close other connections, or send store: true")
        super()._room_for(size)
        self._settle()

    async def create(self, record: ResponseRecord) -> None:
        request, response, size = self._measure(record)  # what it will hold, charged before it is stored
        self._room_for(size)
        self._store(record, request, response, size)
        self._settle()

    def _update(self, record: ResponseRecord, response: bytes | None) -> None:  # update and update_encoded
        super()._update(record, response)
        self._settle()

    def append_nowait(self, response_id: str, entries: Sequence[Entry]) -> None:
        super().append_nowait(response_id, entries)
        self._settle()

    def _forget(self, response_id: str) -> None:  # delete and every eviction come through here
        super()._forget(response_id)
        self._settle()

    async def aclose(self) -> None:
        await super().aclose()
        self.budget.adjust(self.holder, -self._charged)
        self._charged = 0
        self._closed = True
