"""The output items of a native Responses upstream that the gateway passes through instead of making them itself.

How this works: the gateway's writer makes the answer's ``message`` and the client's ``function_call`` items from
text deltas and tool-call chunks. Every *other* item the upstream streams (a hosted tool's call: ``web_search_call``,
``file_search_call``, ``code_interpreter_call``, ``image_generation_call``, ``mcp_list_tools``, ``mcp_call``,
``computer_call``...; ``reasoning``; a type nobody knows yet) is passed through with its events, in the upstream's
order: :class:`PassedItems` turns the events the protocol core released into :class:`PassedItemAdded` /
:class:`PassedItemEvent` / :class:`PassedItemDone` chunks, and the pipeline writes them with the writer's sequence
numbers, output indices and item ids (server/responses/item_relay.py maps names to the client's dialect).

The repair half: an event is matched to its item by ``item_id``, else by ``output_index`` (llama.cpp sends no
indices; Copilot mints a new id per event), and is passed on only where it is valid in the stream the writer makes,
so the writer's own checker never has to end the response for the upstream's mistakes: an event before its item was
added, after it was done, a second ``added``, a part's delta after that part's ``done`` are dropped (the core already
counted them in the repair report); an ``output_item.done`` that was never added opens the item first; an item still
open at the upstream's terminal is closed with its object from the terminal's ``output`` (else as last seen, status
``incomplete``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from respstream.protocol import events as ev
from respstream.protocol.rules import ITEM_ROLES
from respstream.server.upstream.base import Chunk, PassedItemAdded, PassedItemDone, PassedItemEvent

__all__ = ["OWN_ITEM_TYPES", "PassedItems"]

# Items the writer makes itself from the upstream's text and tool-call chunks.
OWN_ITEM_TYPES: Final = frozenset({"message", "function_call"})
# Events of the writer's own items: never matched to a passed item by output_index alone.
_OWN_EVENTS: Final = frozenset({
    ev.OutputTextDelta, ev.OutputTextDone, ev.OutputTextAnnotationAdded, ev.RefusalDelta, ev.RefusalDone,
    ev.FunctionCallArgumentsDelta, ev.FunctionCallArgumentsDone,
})
_ENVELOPE: Final = ("type", "sequence_number", "item_id", "output_index", "invalid_fields")
_OPEN, _TEXT_DONE, _CLOSED = 1, 2, 3


class _Item:
    __slots__ = ("done", "ids", "item", "parts")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.ids: set[str] = set()
        self.done = False
        self.parts: dict[tuple[str, int], int] = {}


class PassedItems:
    """One upstream response's passed-through items. :meth:`take` per released event; :meth:`close` at the
    terminal."""

    def __init__(self) -> None:
        self._items: list[_Item] = []  # by key
        self._by_id: dict[str, int] = {}
        self._by_index: dict[int, int] = {}  # the upstream's output_index -> key

    @property
    def open_count(self) -> int:
        return sum(1 for item in self._items if not item.done)

    def take(self, event: ev.Event) -> list[Chunk] | None:
        """The chunks ``event`` gives when it belongs to a passed item (``[]``: dropped as invalid), ``None`` when it
        does not (the caller translates it)."""
        cls = event.__class__
        if cls is ev.OutputItemAdded or cls is ev.OutputItemDone:
            item = event.item  # type: ignore[attr-defined]
            if not isinstance(item, dict) or item.get("type") in OWN_ITEM_TYPES:
                return None
            item_id, oi = item.get("id"), event.output_index  # type: ignore[attr-defined]
            if cls is ev.OutputItemAdded:
                # A second added for the same item (by its id; an item without one, by its index) is dropped.
                key = self._by_id.get(item_id) if isinstance(item_id, str) else self._by_index.get(oi)
                if key is not None:
                    return []  # a second added for the same item
                return [PassedItemAdded(self._open(item, oi), item)]
            key = self._locate(item_id, oi, cls)
            if key is None:  # done without added: open it first, so the client sees a whole item
                key = self._open(item, oi)
                return [PassedItemAdded(key, item), self._done(key, item)]
            return [] if self._items[key].done else [self._done(key, item)]
        if cls is ev.UnknownEvent:
            raw = event.raw  # type: ignore[attr-defined]
            key = self._locate(raw.get("item_id"), raw.get("output_index"), cls)
            if key is None:
                return None
            return self._event(key, "item", event.type, raw, "item_id" in raw)
        if "item_id" not in cls.__struct_fields__ and "output_index" not in cls.__struct_fields__:
            return None
        key = self._locate(getattr(event, "item_id", None), getattr(event, "output_index", None), cls)
        if key is None:
            return None
        canonical = ev.EVENT_ALIASES.get(cls, cls)
        fields = msgspec.to_builtins(event)
        return self._event(key, ITEM_ROLES.get(cls, "item"), str(canonical.__struct_config__.tag), fields,
                           "item_id" in cls.__struct_fields__, event)

    def close(self, final_output: Any) -> list[Chunk]:
        """The upstream's terminal came: a done chunk for every item still open (see the module docstring)."""
        finals = {o.get("id"): o for o in final_output if isinstance(o, dict)} if isinstance(final_output, list) \
            else {}
        out: list[Chunk] = []
        for key, entry in enumerate(self._items):
            if entry.done:
                continue
            final = next((finals[i] for i in entry.ids if i in finals), None)
            if final is None:
                final = {**entry.item, "status": "incomplete"}
            out.append(self._done(key, final))
        return out

    # -- internals -------------------------------------------------------------------------------------------------

    def _locate(self, item_id: Any, output_index: Any, cls: type[ev.Event]) -> int | None:
        if isinstance(item_id, str) and item_id in self._by_id:
            return self._by_id[item_id]
        if isinstance(output_index, int) and output_index in self._by_index and (
            item_id is None or cls not in _OWN_EVENTS
        ):
            return self._by_index[output_index]
        return None

    def _open(self, item: dict[str, Any], output_index: Any) -> int:
        key = len(self._items)
        entry = _Item(item)
        self._items.append(entry)
        item_id = item.get("id")
        if isinstance(item_id, str):
            entry.ids.add(item_id)
            self._by_id[item_id] = key
        if isinstance(output_index, int):
            self._by_index[output_index] = key
        return key

    def _done(self, key: int, item: dict[str, Any]) -> PassedItemDone:
        self._items[key].done = True
        return PassedItemDone(key, item)

    def _event(self, key: int, role: str, name: str, raw: dict[str, Any], has_item_id: bool,
               event: ev.Event | None = None) -> list[Chunk]:
        entry = self._items[key]
        if entry.done:
            return []  # after the item's done
        item_id = raw.get("item_id")
        if isinstance(item_id, str) and item_id not in self._by_id:
            entry.ids.add(item_id)  # an id minted per event: later events may come with it again
            self._by_id[item_id] = key
        if role not in ("item", "item.added", "item.done"):
            if role.startswith("summary"):
                part: tuple[str, int] = ("summary", _index(getattr(event, "summary_index", None)))
            else:
                part = ("content", _index(getattr(event, "content_index", None)))
            state = entry.parts.get(part)
            if role in ("part.added", "summary.added"):
                if state is not None:
                    return []  # the part was opened already
                entry.parts[part] = _OPEN
            elif role in ("part.close", "summary.close"):
                if state == _CLOSED:
                    return []
                entry.parts[part] = _CLOSED
            elif state is not None and state != _OPEN:
                return []  # a delta or a second done after the part's done
            elif role in ("part.done", "summary.done"):
                entry.parts[part] = _TEXT_DONE
            else:
                entry.parts[part] = _OPEN
        fields = {k: v for k, v in raw.items() if k not in _ENVELOPE}
        return [PassedItemEvent(key, name, fields, has_item_id)]


def _index(value: Any) -> int:
    return value if isinstance(value, int) else 0
