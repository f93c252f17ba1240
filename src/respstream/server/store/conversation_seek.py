"""A page of a conversation after a cursor, found by seeking to the cursor, not by reading the history before it.

Why: ``GET /v1/conversations/{id}/items?after=<cursor>`` read windows growing 4x from one end and decoded each whole
until the cursor turned up, so a cursor deep in a 147 MB conversation cost +241-387 MB per request (issue 42, M5).
:func:`conversation_after` asks the store for the cursor's position (SQLite: an index on the item id; Redis: a list of
the ids kept beside the items; memory: an id -> position index kept with the items, store/memory_conversations.py)
and reads only the page from there. A store without such a lookup is read in growing windows.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["conversation_after"]


class _Conversations(Protocol):
    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]: ...


async def conversation_after(store: _Conversations, conversation_id: str, item_id: str, *, count: int,
                             newer: bool) -> list[dict[str, Any]] | None:
    """The item ``item_id`` and up to ``count`` items past it (``newer``: toward the newest item, else toward the
    oldest), oldest first; None when no item of the conversation has that id."""
    seek = getattr(store, "conversation_after", None)
    if seek is not None:
        found: list[dict[str, Any]] | None = await seek(conversation_id, item_id, count=count, newer=newer)
        return found
    # No lookup (every store of the gateway has one; a store written elsewhere may not): windows from the end the
    # page starts at, growing 4x until one holds the cursor and `count` past it.
    size = max(2 * count, 2)
    while True:
        items = await (store.conversation(conversation_id, oldest=size) if newer else
                       store.conversation(conversation_id, newest=size))
        at = next((i for i, item in enumerate(items) if item.get("id") == item_id), None)
        whole = len(items) < size
        if at is not None and (whole or (len(items) - 1 - at if newer else at) >= count):
            return items[at:at + count + 1] if newer else items[max(0, at - count):at + 1]
        if whole:
            return None
        size *= 4
