"""The typed event the writer's rule checker reads, made from the fields the writer built (no decode of its bytes).

Why: the writer encodes each event once; decoding those bytes again only so the checker can read them cost a second
pass over every event, the whole Response object twice a request (``response.created``, the terminal). The fields
are already Python values of JSON types, so the event class takes them as they are.

What keeps it honest: the checker must read what the client receives. The fields are the very objects the encoder
has just turned into the event's bytes, and nothing the writer emits is changed afterwards (items, parts and the
Response are replaced, not edited, once emitted). The one list the assembler behind the checker edits (a part's
``annotations``) it copies first (protocol/output_items.py). Only the writer's own events go this way: what other
modules hand in (``emit_event``, ``add_output_item``: an upstream's items and fields among them) is decoded from its
bytes as before, so a value of the wrong JSON type is judged as a client would parse it.
tests/server/test_checker_input.py decodes the bytes of many streams (text, refusals, reasoning, tool calls, hosted
tools, annotations, failures, incomplete, cancels) and compares them with the checker's input, both when checked and
again at the end of the stream.

An event type the catalogue does not know, or a field its class does not have, gets ``None``: the caller decodes the
bytes then, as before.
"""

from __future__ import annotations

from typing import Any, Final

from respstream.protocol import events as ev

__all__ = ["typed_event"]

# Event type -> (its class, the fields it takes). Every class of the catalogue, under each of its wire names.
_CLASSES: Final[dict[str, tuple[type[ev.Event], frozenset[str]]]] = {
    str(cls.__struct_config__.tag): (cls, frozenset(cls.__struct_fields__) - {"sequence_number", "invalid_fields"})
    for cls in ev.EVENT_CLASSES
    if cls is not ev.UnknownEvent
}


def typed_event(event_type: str, sequence_number: int, fields: dict[str, Any]) -> ev.Event | None:
    """``decode_event`` of the event ``{"type": event_type, "sequence_number": ..., **fields}`` when encoded,
    without encoding it: the fields' own objects (``None`` when only decoding can tell what it would be)."""
    known = _CLASSES.get(event_type)
    if known is None or not fields.keys() <= known[1]:
        return None
    return known[0](sequence_number=sequence_number, **fields)
