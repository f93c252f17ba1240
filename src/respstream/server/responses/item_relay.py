"""A native Responses upstream's passed-through items (hosted-tool calls, reasoning...:
upstream/responses/passed_items.py) written through the writer in the client's dialect.

How this works: each item gets the writer's next output index and an id of ours (the upstream's may repeat across
tool rounds, or change on every event); its events follow with that ``item_id`` and ``output_index`` and the
writer's sequence numbers. Names: ``openai`` and ``platform`` get them as OpenAI sends them (the platform's clients
ignore what they do not know, as its changelog asks); reasoning text events take the dialect's name
(``response.reasoning_text.*`` / Open Responses' ``response.reasoning.*``). Open Responses: an item or event type the
spec does not define is an extension and MUST carry the slug of its owner; these are OpenAI's item types (the spec's
own example is ``openai:web_search_call``), so they go as ``openai:<type>``; ones already prefixed stay as they are.
A spec type whose opening object the spec's schema refuses (OpenAI opens a ``compaction`` item without the
``encrypted_content`` the spec requires) goes the same way, for its whole life: the client gets a valid stream, and
the item's type says whose shape it is.
"""

from __future__ import annotations

from typing import Any, Final

from respstream.protocol.spec_schema import SPEC_EVENT_TYPES, SPEC_ITEM_TYPES, event_problems, is_extension
from respstream.server.events.writer import ResponseWriter
from respstream.server.upstream.base import PassedItemAdded, PassedItemDone, PassedItemEvent

__all__ = ["FOREIGN_PREFIX", "ItemRelay"]

FOREIGN_PREFIX: Final = "openai:"  # the owner of the Responses API's own item and event types
_REASONING_TEXT: Final = "response.reasoning_text"


class ItemRelay:
    """Writes one response's passed-through items; one per round (keys are per upstream response)."""

    def __init__(self, writer: ResponseWriter) -> None:
        self.writer = writer
        self._open: dict[int, tuple[int, str, str]] = {}  # key -> (our output index, our item id, our item type)
        self._prefix = writer.dialect.extension_tool_items  # Open Responses: non-spec types are extensions

    def added(self, chunk: PassedItemAdded) -> None:
        item_id = self.writer.dialect.new_id(_id_prefix(chunk.item))
        kind = self._type(chunk.item)
        index = self.writer.add_output_item({**chunk.item, "id": item_id, "type": kind})
        self._open[chunk.key] = (index, item_id, kind)

    def event(self, chunk: PassedItemEvent) -> None:
        where = self._open.get(chunk.key)
        if where is None:
            return  # (passed_items.py only sends events of open items)
        index, item_id, _ = where
        located: dict[str, Any] = {"item_id": item_id, "output_index": index} if chunk.item_id else {
            "output_index": index}
        self.writer.emit_event(self._event_name(chunk.type), {**located, **chunk.fields})

    def done(self, chunk: PassedItemDone) -> None:
        where = self._open.pop(chunk.key, None)
        if where is None:
            return
        index, item_id, kind = where
        self.writer.finish_output_item(index, {**chunk.item, "id": item_id, "type": kind})

    def _type(self, item: dict[str, Any]) -> Any:
        kind = item.get("type")
        if not self._prefix or not isinstance(kind, str) or is_extension(kind):
            return kind
        if kind in SPEC_ITEM_TYPES and not event_problems(
            {"type": "response.output_item.added", "sequence_number": 0, "output_index": 0, "item": item}
        ):
            return kind
        return FOREIGN_PREFIX + kind

    def _event_name(self, name: str) -> str:
        if name.startswith(_REASONING_TEXT + "."):
            name = self.writer.dialect.reasoning_event + name[len(_REASONING_TEXT) :]
        if self._prefix and name not in SPEC_EVENT_TYPES and not is_extension(name):
            name = FOREIGN_PREFIX + name
        return name


def _id_prefix(item: dict[str, Any]) -> str:
    """``ws`` for ``ws_123``: our id keeps the upstream's kind of prefix; ``item`` when it has none."""
    upstream_id = item.get("id")
    if isinstance(upstream_id, str) and "_" in upstream_id:
        head = upstream_id.split("_", 1)[0]
        if head.isalnum() and len(head) <= 8:
            return head
    return "item"
