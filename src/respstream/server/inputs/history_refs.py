"""A record's ``base`` refers to the conversation items it saw instead of copying them.

Why: every response naming a conversation copied the conversation's last ``conversation_window`` items into its
record, so each 113-byte request on a conversation of 40 x 1 MiB items stored 13-17 MB, failed requests included
(issue 42, H6v). A record now keeps one element per conversation window, ``{"type": "conversation_window",
"conversation_id", "last_item_id", "items"}``: the ``items`` items of the conversation that end with
``last_item_id``, read back from the conversation by seeking to that item
(:func:`~respstream.server.store.conversation_seek.conversation_after`) when a later ``previous_response_id`` rebuilds
the history. Items deleted from the conversation since are no longer part of it; a deleted ``last_item_id`` (or
conversation) ends that part of the history, as a deleted parent ends a chain. Items stored before they had ids
are still copied.
"""

from __future__ import annotations

from typing import Any

from respstream.server.store.base import Store
from respstream.server.store.conversation_seek import conversation_after

__all__ = ["WINDOW_REF", "base_size", "conversation_reference", "resolve_base"]

WINDOW_REF = "conversation_window"


def conversation_reference(conversation_id: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a record keeps of the conversation ``items`` (its newest items, oldest first) it was given."""
    if not items:
        return []
    if not all(isinstance(item.get("id"), str) for item in items):
        return list(items)  # items from before ids: nothing to refer to
    return [{"type": WINDOW_REF, "conversation_id": conversation_id, "last_item_id": items[-1]["id"],
             "items": len(items)}]


def base_size(base: list[dict[str, Any]]) -> int:
    """How many items ``base`` stands for (a reference counts as the items it names)."""
    return sum(element["items"] if element.get("type") == WINDOW_REF else 1 for element in base)


async def resolve_base(store: Store, base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``base`` with each reference replaced by the conversation items it names (as stored JSON)."""
    out: list[dict[str, Any]] = []
    for element in base:
        if element.get("type") != WINDOW_REF:
            out.append(element)
            continue
        count = element.get("items")
        conversation_id, last = element.get("conversation_id"), element.get("last_item_id")
        if not isinstance(count, int) or not isinstance(conversation_id, str) or not isinstance(last, str):
            continue  # not one of ours: a record is never trusted to be well formed
        found = await conversation_after(store, conversation_id, last, count=max(0, count - 1), newer=False)
        out.extend(found or [])
    return out
