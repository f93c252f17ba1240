"""Foreground responses in memory, background responses and conversations in a durable store (DESIGN §4 Stores).

How this works: ``create`` sends a record to the durable store when it is a background response, else to memory.
Every later call by id goes to the store that holds it: memory when it has the id (a dict lookup), else the durable
one (so after a restart, when memory is empty, lookups find the durable records). Conversations always live in the
durable store. Callers that want the underlying store of a response (the writer's synchronous memory fast path, the
SSE sender's ``wait_beyond`` path) ask :meth:`SplitStore.backend_of`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from respstream.server.store.base import ConversationRecord, LogEntry, ResponseRecord, Store
from respstream.server.store.conversation_seek import conversation_after
from respstream.server.store.memory import MemoryStore

__all__ = ["SplitStore", "backend_of"]


class SplitStore:
    """A :class:`Store` over ``memory`` (foreground) and ``durable`` (background, conversations)."""

    def __init__(self, memory: MemoryStore, durable: Store) -> None:
        self.memory = memory
        self.durable = durable

    def backend_of(self, response_id: str) -> Store:
        return self.memory if self.memory.has(response_id) else self.durable

    def backend_for(self, record: ResponseRecord) -> Store:
        return self.durable if record.background else self.memory

    # -- records ---------------------------------------------------------------------------------------------------
    async def create(self, record: ResponseRecord) -> None:
        await self.backend_for(record).create(record)

    async def get(self, response_id: str) -> ResponseRecord | None:
        if self.memory.has(response_id):
            return await self.memory.get(response_id)
        return await self.durable.get(response_id)

    async def update(self, record: ResponseRecord) -> None:
        await self.backend_of(record.id).update(record)

    async def delete(self, response_id: str) -> bool:
        if await self.memory.delete(response_id):
            return True
        return await self.durable.delete(response_id)

    # -- the log ---------------------------------------------------------------------------------------------------
    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        await self.backend_of(response_id).append(response_id, entries)

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        return await self.backend_of(response_id).read(response_id, after, limit)

    def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        return self.backend_of(response_id).tail(response_id, after)

    def hold_lease(self, response_id: str) -> AbstractAsyncContextManager[None]:
        return self.backend_of(response_id).hold_lease(response_id)

    # -- conversations ---------------------------------------------------------------------------------------------
    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]:
        return await self.durable.conversation(conversation_id, newest=newest, oldest=oldest)

    async def conversation_after(self, conversation_id: str, item_id: str, *, count: int,
                                 newer: bool) -> list[dict[str, Any]] | None:
        return await conversation_after(self.durable, conversation_id, item_id, count=count, newer=newer)

    async def extend_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        await self.durable.extend_conversation(conversation_id, items)

    async def create_conversation(self, record: ConversationRecord) -> None:
        await self.durable.create_conversation(record)

    async def get_conversation(self, conversation_id: str) -> ConversationRecord | None:
        return await self.durable.get_conversation(conversation_id)

    async def update_conversation(self, record: ConversationRecord) -> None:
        await self.durable.update_conversation(record)

    async def delete_conversation(self, conversation_id: str) -> bool:
        return await self.durable.delete_conversation(conversation_id)

    async def conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        return await self.durable.conversation_item(conversation_id, item_id)

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        return await self.durable.delete_conversation_item(conversation_id, item_id)

    # -- maintenance -----------------------------------------------------------------------------------------------
    async def recover(self, instance_id: str) -> int:
        return await self.memory.recover(instance_id) + await self.durable.recover(instance_id)

    async def expire(self, now: float | None = None) -> int:
        return await self.memory.expire(now) + await self.durable.expire(now)

    async def aclose(self) -> None:
        await self.memory.aclose()
        await self.durable.aclose()


def backend_of(store: Store, response_id: str) -> Store:
    """The store that really holds ``response_id``: itself, unless ``store`` is a :class:`SplitStore`."""
    return store.backend_of(response_id) if isinstance(store, SplitStore) else store
