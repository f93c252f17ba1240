"""The typed event the writer's rule checker reads, made from the fields the writer built (no decode of its bytes).

Why: the writer encodes each event once; decoding those bytes again only so the checker can read them cost a second
pass over every event, the whole Response object twice a request (``response.created``, the terminal). The event's
dict (what was encoded) is converted to its class instead (``msgspec.convert``): the same validation of each field's
type as decoding, without parsing; nested objects are shared, not rebuilt (the top level of ``response``, ``item``,
``part`` is copied). A field of the wrong type gives ``None``: the caller decodes the bytes then, so the lenient
decoder reports it exactly as a client would see it.

What keeps it honest: the checker must read what the client receives. The fields are the very objects the encoder
has just turned into the event's bytes, and nothing the writer emits is changed afterwards (items, parts and the
Response are replaced, not edited, once emitted). The one list the assembler behind the checker edits (a part's
``annotations``) it copies first (protocol/output_items.py). Only the writer's own events go this way: what other
modules hand in (``emit_event``, ``add_output_item``: an upstream's items and fields among them) is decoded from its
bytes as before (their nested objects are not the writer's to promise unchanged).
tests/server/test_checker_input.py decodes the bytes of many streams (text, refusals, reasoning, tool calls, hosted
tools, annotations, failures, incomplete, cancels) and compares them with the checker's input, both when checked and
again at the end of the stream.

An event type the catalogue does not know gets ``None`` too (decoded: an :class:`UnknownEvent`); a field its class
does not have is ignored, as decoding ignores it.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from respstream.protocol import events as ev

__all__ = ["typed_event"]

# Event type -> its class: every class of the catalogue, under each of its wire names.
_CLASSES: Final[dict[str, type[ev.Event]]] = {
    str(cls.__struct_config__.tag): cls for cls in ev.EVENT_CLASSES if cls is not ev.UnknownEvent
}
# The lifecycle events (a whole Response): made directly, as converting would copy the Response's top level.
_LIFECYCLE: Final = frozenset(cls for cls in _CLASSES.values() if issubclass(cls, ev.ResponseEvent))


def typed_event(event: dict[str, Any]) -> ev.Event | None:
    """``decode_event`` of ``event`` (a dict with ``type`` and ``sequence_number``, of JSON types) once encoded,
    without encoding it; ``None`` when only decoding can tell (an unknown type, a field of the wrong type)."""
    cls = _CLASSES.get(event["type"])
    if cls is None:
        return None
    if cls in _LIFECYCLE and len(event) == 3:  # type, sequence_number, response: nothing else to validate
        response, seq = event.get("response"), event["sequence_number"]
        if response.__class__ is dict and seq.__class__ is int:
            return cls(sequence_number=seq, response=response)
    try:
        return msgspec.convert(event, cls)
    except msgspec.ValidationError:
        return None
