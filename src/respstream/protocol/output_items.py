"""Output items under assembly: where each item, content part and streamed string lives, and how it is read back.

How this works: items live in ``_items`` keyed by ``output_index`` (a dict, so a hostile index cannot make us allocate a
huge list). Every streamed string (a text or refusal part, a reasoning summary or text part, function / MCP
arguments, custom tool input, interpreter code, a shell command) is a :class:`Slot`: the deltas as they came plus the
last ``*.done`` value; its value is the final one when that arrived, else the deltas joined. Item metadata is merged
from ``output_item.added``/``done`` and the part events. An event is located by ``output_index`` when present, else by
its ``item_id``; when even that is unknown a placeholder item is created, so nothing that arrived is lost.

:class:`OutputItems` is the base of the :class:`~respstream.protocol.assembler.Assembler`; the event handlers live in
``assembler.py`` (lifecycle, messages) and ``tool_items.py`` (tool calls, hosted tools, reasoning, shell).
"""

from __future__ import annotations

from typing import Any

from respstream.protocol.assembled import JSONObject

__all__ = ["OutputItems", "Slot"]


class Slot:
    """One streamed string: its deltas and its latest ``*.done`` value."""

    __slots__ = ("chunks", "final", "mark")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.final: str | None = None
        self.mark = 0  # chunks[:mark] are already-joined blocks (see Assembler.compact)

    def value(self) -> str:
        return self.final if self.final is not None else "".join(self.chunks)

    def streamed(self) -> str | None:
        """The deltas joined, or None when no delta arrived."""
        return "".join(self.chunks) if self.chunks else None


class OutputItems:
    """The items, parts and slots of one response under assembly, and the ways to find and read them."""

    def __init__(self) -> None:
        self._items: dict[int, JSONObject] = {}
        self._by_id: dict[str | None, int] = {}
        self._parts: dict[tuple[int, int], JSONObject] = {}
        self._part_index: dict[int, set[int]] = {}
        self._summaries: dict[tuple[int, int], JSONObject] = {}
        self._summary_index: dict[int, set[int]] = {}
        self._commands: dict[int, set[int]] = {}
        self._slots: dict[tuple[int, Any], Slot] = {}

    # --- queries used by rules.py -------------------------------------------------------------------------------

    def streamed_value(self, key: tuple[int, Any]) -> str | None:
        """The deltas of one slot joined (None when none arrived). Keys: ``(oi, ci)`` for content parts,
        ``(oi, "arguments")``, ``(oi, "input")``, ``(oi, "code")``, ``(oi, ("summary", si))``."""
        slot = self._slots.get(key)
        return None if slot is None else slot.streamed()

    def resolve_index(self, output_index: int | None, item_id: str | None) -> int | None:
        """The output index an event refers to: its own, else the one of its ``item_id``, else None."""
        if output_index is not None:
            return output_index
        return self._by_id.get(item_id)

    def part_annotations(self, oi: int, ci: int) -> list[Any] | None:
        """The annotations assembled so far for content part ``(oi, ci)`` (None when the part is unknown)."""
        part = self._parts.get((oi, ci))
        value = None if part is None else part.get("annotations")
        return value if isinstance(value, list) else None

    def next_index(self) -> int:
        """The output index a new item without one would get."""
        return max(self._items, default=-1) + 1

    def materialize(self) -> list[JSONObject]:
        """The output items as assembled from the events (not from the terminal response), in output order."""
        return [self.materialize_item(oi) for oi in sorted(self._items)]

    # --- locating items and parts -------------------------------------------------------------------------------

    def _item(self, output_index: int | None, item_id: str | None, kind: str) -> int:
        """Find (or create a placeholder for) the item an event refers to; return its output index."""
        oi = output_index if output_index is not None else self._by_id.get(item_id)
        if oi is None:
            oi = max(self._items, default=-1) + 1
        if oi not in self._items:
            item: JSONObject = {"type": kind}
            if item_id is not None:
                item["id"] = item_id
            if kind == "message":
                item.update(status="in_progress", role="assistant", content=[])
            self._items[oi] = item
            self._by_id.setdefault(item_id, oi)
        return oi

    def _part(self, oi: int, ci: int, part_type: str) -> JSONObject:
        key = (oi, ci)
        part = self._parts.get(key)
        if part is None:
            part = {"type": part_type}
            if part_type == "output_text":
                part["annotations"] = []
            self._parts[key] = part
            self._part_index.setdefault(oi, set()).add(ci)
        return part

    def _slot(self, key: tuple[int, Any]) -> Slot:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = Slot()
        return slot
    # --- merging item and part objects -------------------------------------------------------------------------

    def _merge_item(self, oi: int, src: JSONObject) -> None:
        item = self._items[oi]
        for key, value in src.items():
            if key in ("content", "summary") and isinstance(value, list):
                item.setdefault(key, [])  # held per part, see _set_part / _set_summary
                continue
            if key in ("arguments", "input", "code") and isinstance(value, str):
                slot = self._slot((oi, key))
                if not slot.chunks and slot.final is None and value:
                    slot.final = value  # an item that arrives complete (arguments only in added/done)
                continue
            item[key] = value
        iid = item.get("id")
        if isinstance(iid, str):
            self._by_id[iid] = oi
        if "content" in src and isinstance(src["content"], list):
            for ci, part in enumerate(src["content"]):
                if isinstance(part, dict) and (oi, ci) not in self._parts:
                    self._set_part(oi, ci, part)

    def _set_part(self, oi: int, ci: int, src: JSONObject) -> None:
        part_type = src.get("type")
        part = self._part(oi, ci, part_type if isinstance(part_type, str) else "output_text")
        part.update({k: v for k, v in src.items() if k not in ("text", "refusal")})
        annotations = part.get("annotations")
        if isinstance(annotations, list):
            # Our own copy: annotation.added edits it, and src may be the producer's object (the gateway's checker
            # reads the events as built, server/events/typed_events.py).
            part["annotations"] = list(annotations)
        for name in ("text", "refusal"):
            value = src.get(name)
            if isinstance(value, str):
                slot = self._slot((oi, ci))
                # An empty opening part ({"text": ""}) must not override the deltas still to come.
                if value or slot.chunks or slot.final is not None:
                    slot.final = value

    def _set_summary(self, oi: int, si: int, src: JSONObject) -> None:
        key = (oi, si)
        part = self._summaries.get(key)
        if part is None:
            part = self._summaries[key] = {"type": "summary_text"}
            self._summary_index.setdefault(oi, set()).add(si)
        part.update({k: v for k, v in src.items() if k != "text"})
        text = src.get("text")
        slot = self._slot((oi, ("summary", si)))
        if isinstance(text, str) and (text or slot.chunks or slot.final is not None):
            slot.final = text

    # --- materialising ------------------------------------------------------------------------------------------

    def materialize_item(self, oi: int) -> JSONObject:
        """One output item (``oi`` must have been seen) as assembled from the events."""
        item = dict(self._items[oi])
        slots = self._slots
        cis = self._part_index.get(oi)
        if cis:
            content = []
            for ci in sorted(cis):
                part = dict(self._parts[(oi, ci)])
                slot = slots.get((oi, ci))
                name = "refusal" if part.get("type") == "refusal" else "text"
                part[name] = slot.value() if slot is not None else part.get(name, "")
                content.append(part)
            item["content"] = content
        sis = self._summary_index.get(oi)
        if sis:
            summary = []
            for si in sorted(sis):
                part = dict(self._summaries[(oi, si)])
                slot = slots.get((oi, ("summary", si)))
                part["text"] = slot.value() if slot is not None else ""
                summary.append(part)
            item["summary"] = summary
        for name in ("arguments", "input", "code"):
            slot = slots.get((oi, name))
            if slot is not None:
                item[name] = slot.value()
        commands = self._commands.get(oi)
        if commands:
            action = dict(item.get("action") or {})
            action["commands"] = [slots[(oi, ("command", ci))].value() for ci in sorted(commands)]
            item["action"] = action
        return item
