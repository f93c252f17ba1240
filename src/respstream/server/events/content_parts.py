"""The writer's open message and reasoning items, and the events that close one of their content parts.

How this works: :class:`OpenItem` is the item the writer is streaming into, :class:`OpenPart` its current content
part (text so far, token logprobs). :func:`closing_events` is what closing a part says, in order::

    [response.rewrite.in_progress]            the final text differs from the deltas (a rewrite pass changed it)
    response.output_text.annotation.added*    one per url_citation of the final text (output_text parts only)
    response.output_text.done | response.refusal.done | <reasoning>.done
    response.content_part.done                the part with its final text (and annotations, logprobs)

The annotations come after the rewrite notice and before ``output_text.done`` (the spec's grammar puts them among the
deltas): their indices are into the final text, which the client has once the ``done`` arrives.
"""

from __future__ import annotations

from typing import Any

from respstream.server.events.dialects import Dialect
from respstream.server.store.base import DeltaTemplate

__all__ = ["OpenItem", "OpenPart", "closing_events", "part_object"]


class OpenPart:
    __slots__ = ("content_index", "kind", "logprobs", "parts", "text")

    def __init__(self, kind: str, content_index: int) -> None:
        self.kind = kind  # output_text | refusal | reasoning_text
        self.content_index = content_index
        self.parts: list[str] = []
        self.logprobs: list[Any] = []  # token logprobs of an output_text part, when the request asked for them

    def joined(self) -> str:
        """The part's text so far. The deltas are kept joined (closing a part asks for its text more than once)."""
        parts = self.parts
        if len(parts) < 2:
            return parts[0] if parts else ""
        text = "".join(parts)
        parts[:] = [text]  # (in place: the same text, one string; later deltas are appended after it)
        return text


class OpenItem:
    __slots__ = ("content", "id", "kind", "output_index", "part", "template")

    def __init__(self, kind: str, item_id: str, output_index: int) -> None:
        self.kind = kind  # message | reasoning
        self.id = item_id
        self.output_index = output_index
        self.content: list[dict[str, Any]] = []
        self.part: OpenPart | None = None
        self.template: DeltaTemplate | None = None  # the open part's text-delta template


def part_object(kind: str, text: str, annotations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A content part as the Responses API shows it (``content_part.added/done``, the item's ``content``)."""
    if kind == "output_text":
        return {"type": "output_text", "text": text, "annotations": list(annotations or []), "logprobs": []}
    if kind == "refusal":
        return {"type": "refusal", "refusal": text}
    return {"type": "reasoning_text", "text": text}


def closing_events(
    dialect: Dialect,
    item: OpenItem,
    part: OpenPart,
    text: str,
    *,
    rewritten: bool = False,
    annotations: list[dict[str, Any]] | None = None,
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """``(events, done_part)``: the ``(type, fields)`` of each event that closes ``part`` with final ``text``, and
    the part object for the item's ``content``. ``annotations`` apply to an ``output_text`` part only."""
    where = {"item_id": item.id, "output_index": item.output_index, "content_index": part.content_index}
    events: list[tuple[str, dict[str, Any]]] = []
    if rewritten:
        events.append((dialect.extension("response.rewrite.in_progress"), {}))
    cited = list(annotations or []) if part.kind == "output_text" else []
    if part.kind == "output_text":
        for index, annotation in enumerate(cited):
            events.append(("response.output_text.annotation.added",
                           {**where, "annotation_index": index, "annotation": annotation}))
        events.append(("response.output_text.done", {**where, "text": text, "logprobs": part.logprobs}))
    elif part.kind == "refusal":
        events.append(("response.refusal.done", {**where, "refusal": text}))
    else:
        events.append((f"{dialect.reasoning_event}.done", {**where, "text": text}))
    done_part = part_object(part.kind, text, cited)
    if part.logprobs:
        done_part["logprobs"] = part.logprobs
    events.append(("response.content_part.done", {**where, "part": done_part}))
    return events, done_part
