"""The memory store's conversations: items kept with an id -> position index and their real size,
:class:`MemoryConversations` (issue 42, M5 remainder).

Why: a page after a cursor (``GET /v1/conversations/{id}/items?after=``) read windows growing 4x until the cursor
turned up (copies of slices of references: a cursor deep in a long conversation cost copies of the whole history per
request), and the items were counted in no byte budget, so a huge conversation grew memory outside
``memory_store_max_bytes``. Now a cursor is found through the index (SQLite and Redis seek the same way,
store/conversation_seek.py), so a page costs the page; and each item is measured when it is added (``deep_size``, the
list slot, the index entry, its size's own slot) so the memory store can count it and refuse what does not fit.

How: a conversation's items are a list; ``positions`` maps an item id to its absolute position (the count of items
ever added before it), ``base`` is the absolute position of the list's first item, so trimming the oldest items
(``history_limit``) moves ``base`` and drops their ids without renumbering the rest. Deleting one item from the
middle renumbers the items after it (linear in the conversation, once per delete). Item ids are unique (the gateway
makes them); were one repeated, the index finds the newest, and an older one of that id is found no more once the
newest is deleted. Sizes are kept beside the items
(an array of 8-byte integers), so what is given back is what was charged even if a caller changed an item since.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

from respstream.server.store.object_size import DICT_ENTRY_BYTES, SLOT_BYTES, deep_sizes

__all__ = ["MemoryConversations", "item_bytes"]

# Besides the item: its list slot, its index entry (the id is the item's own string) and its size's array slot.
_ITEM_OVERHEAD = SLOT_BYTES + DICT_ENTRY_BYTES + 8


def item_bytes(items: list[dict[str, Any]]) -> list[int]:
    """What each conversation item takes in the memory store (measured, with its slots; an object the items share,
    such as the keys they all repeat, counted once)."""
    return [size + _ITEM_OVERHEAD for size in deep_sizes(items)]


@dataclass(slots=True)
class _Conversation:
    items: list[dict[str, Any]] = field(default_factory=list)
    sizes: array[int] = field(default_factory=lambda: array("q"))
    positions: dict[str, int] = field(default_factory=dict)  # item id -> absolute position (newest of that id)
    base: int = 0  # absolute position of items[0]

    def index_of(self, item_id: str) -> int | None:
        at = self.positions.get(item_id)
        return None if at is None else at - self.base

    def forget_ids(self, items: list[dict[str, Any]], start: int) -> None:
        """Drop the index entries of ``items`` (which were at absolute positions from ``start``)."""
        for offset, item in enumerate(items):
            item_id = item.get("id")
            if isinstance(item_id, str) and self.positions.get(item_id) == start + offset:
                del self.positions[item_id]


class MemoryConversations:
    """Every conversation's items; ``bytes`` is what they take (see :func:`item_bytes`)."""

    def __init__(self, history_limit: int) -> None:
        self._by_id: dict[str, _Conversation] = {}
        self._history_limit = history_limit
        self.bytes = 0

    def items(self, conversation_id: str, *, newest: int | None = None,
              oldest: int | None = None) -> list[dict[str, Any]]:
        found = self._by_id.get(conversation_id)
        items = found.items if found is not None else []
        if newest is not None:
            return items[-newest:] if newest > 0 else []
        return list(items if oldest is None else items[:oldest])

    def after(self, conversation_id: str, item_id: str, *, count: int, newer: bool) -> list[dict[str, Any]] | None:
        """The item ``item_id`` and up to ``count`` items past it, oldest first; None when it is not there."""
        found = self._by_id.get(conversation_id)
        at = None if found is None else found.index_of(item_id)
        if found is None or at is None:
            return None
        return found.items[at:at + count + 1] if newer else found.items[max(0, at - count):at + 1]

    def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        found = self._by_id.get(conversation_id)
        at = None if found is None else found.index_of(item_id)
        return None if found is None or at is None else found.items[at]

    def extend(self, conversation_id: str, items: list[dict[str, Any]], sizes: list[int]) -> int:
        """Add ``items`` (measured: ``sizes``), then drop the oldest past ``history_limit``; the bytes added."""
        conv = self._by_id.setdefault(conversation_id, _Conversation())
        top = conv.base + len(conv.items)
        for offset, item in enumerate(items):
            item_id = item.get("id")
            if isinstance(item_id, str):
                conv.positions[item_id] = top + offset  # ids are unique; were one repeated, the newest wins
        conv.items.extend(items)
        conv.sizes.extend(sizes)
        added = sum(sizes)
        over = len(conv.items) - self._history_limit
        if over > 0:
            conv.forget_ids(conv.items[:over], conv.base)
            added -= sum(conv.sizes[:over])
            del conv.items[:over]
            del conv.sizes[:over]
            conv.base += over
        self.bytes += added
        return added

    def delete_item(self, conversation_id: str, item_id: str) -> int | None:
        """Delete the item; the bytes freed, None when it is not there."""
        conv = self._by_id.get(conversation_id)
        at = None if conv is None else conv.index_of(item_id)
        if conv is None or at is None:
            return None
        del conv.positions[item_id]
        freed = conv.sizes[at]
        self.bytes -= freed
        del conv.items[at]
        del conv.sizes[at]
        for offset, item in enumerate(conv.items[at:]):  # the items after it moved down by one
            later = item.get("id")
            if isinstance(later, str):
                position = conv.base + at + offset
                if conv.positions.get(later) == position + 1:  # its own entry (not an older one of that id)
                    conv.positions[later] = position
        return freed

    def drop(self, conversation_id: str) -> int:
        """Forget a conversation; the bytes freed."""
        conv = self._by_id.pop(conversation_id, None)
        freed = 0 if conv is None else sum(conv.sizes)
        self.bytes -= freed
        return freed
