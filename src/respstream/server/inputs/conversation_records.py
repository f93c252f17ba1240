"""Who may use a conversation: :func:`conversation_of` (shared by ``/v1/conversations`` and ``/v1/responses``).

A conversation belongs to the API key that made it. One made with ``POST /v1/conversations`` (or named by OpenAI's
``conversation`` field) must exist; the seed platform's ``conversation_id`` may be any new id, and its first use
makes the conversation, owned by that key (``implicit``). Another key's conversation is "not found", exactly as
an unknown one: nothing tells a caller that someone else's id exists.
"""

from __future__ import annotations

import time

from respstream.server.http_errors import HTTPError
from respstream.server.store.base import ConversationRecord, Store

__all__ = ["conversation_of", "not_found"]


def not_found(conversation_id: str, param: str = "conversation") -> HTTPError:
    return HTTPError(404, "not_found", f"Conversation with id '{conversation_id[:120]}' not found.", param=param)


async def conversation_of(store: Store, conversation_id: str, owner: str | None, *,
                          implicit: bool = False) -> ConversationRecord:
    """The caller's conversation. Raises a 404 :class:`HTTPError` for an unknown (unless ``implicit``: then it is
    created) or someone else's id."""
    record = await store.get_conversation(conversation_id)
    if record is None and implicit:
        record = ConversationRecord(id=conversation_id, created_at=time.time(), owner=owner)
        await store.create_conversation(record)
    if record is None or record.owner != owner:
        raise not_found(conversation_id, "conversation" if not implicit else "conversation_id")
    return record
