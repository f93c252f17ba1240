"""The Open Responses wire rules (protocol/spec_rules.py) through StreamCore(dialect="openresponses"): what the
public suite does not check (`id:`, `[DONE]`, prefixed extensions, event name = type) plus the spec's schemas."""

from __future__ import annotations

import json
from typing import Any

from respstream.protocol.stream import StreamCore

from .test_spec_schema import GOOD

_ITEM = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
_PART = {"item_id": "msg_1", "output_index": 0, "content_index": 0}


def _events(*, extra: list[dict[str, Any]] | None = None, response: dict[str, Any] | None = None) -> list[Any]:
    created = {**(response or GOOD), "status": "in_progress", "output": [], "completed_at": None}
    done_item = {**_ITEM, "status": "completed",
                 "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    final = {**(response or GOOD), "output": [done_item]}
    events: list[Any] = [
        {"type": "response.created", "response": created},
        *(extra or []),
        {"type": "response.output_item.added", "output_index": 0, "item": _ITEM},
        {"type": "response.content_part.added", **_PART, "part": {**done_item["content"][0], "text": ""}},
        {"type": "response.output_text.delta", **_PART, "delta": "hi"},
        {"type": "response.output_text.done", **_PART, "text": "hi"},
        {"type": "response.content_part.done", **_PART, "part": done_item["content"][0]},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {"type": "response.completed", "response": final},
    ]
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events


def _wire(events: list[Any], *, ids: bool = False, done: bool = True, name: str | None = None) -> bytes:
    out = b""
    for event in events:
        head = f"id: {event['sequence_number']}\n" if ids else ""
        out += f"{head}event: {name or event['type']}\ndata: {json.dumps(event)}\n\n".encode()
    return out + (b"data: [DONE]\n\n" if done else b"")


def _codes(raw: bytes) -> list[str]:
    core = StreamCore(dialect="openresponses")
    core.feed(raw)
    core.close()
    return [v.code for v in core.violations]


def test_a_spec_stream_has_no_violations() -> None:
    assert _codes(_wire(_events())) == []


def test_prefixed_extension_events_and_items_are_fine() -> None:
    routing = {"type": "respstream:response.routing.completed", "model_id": "m", "category": "fast"}
    tool = {"id": "rst_1", "type": "respstream:web_search_call", "status": "in_progress"}
    extra = [routing, {"type": "response.output_item.added", "output_index": 9, "item": tool}]
    assert "extension.unprefixed" not in _codes(_wire(_events(extra=extra)))


def test_each_wire_problem_is_reported_once() -> None:
    assert _codes(_wire(_events(), ids=True)) == ["envelope.id_line"]
    assert _codes(_wire(_events(), done=False)) == ["envelope.missing_done"]
    assert _codes(_wire(_events()) + _wire(_events()[-1:], done=False)).count("envelope.after_done") == 1
    assert _codes(_wire(_events(), name="message")) == ["envelope.event_name_mismatch"]
    unprefixed = [{"type": "response.routing.completed", "model_id": "m"}]
    assert _codes(_wire(_events(extra=unprefixed))) == ["extension.unprefixed"]


def test_a_response_missing_spec_fields_is_a_schema_violation() -> None:
    thin = {k: v for k, v in GOOD.items() if k not in ("truncation", "top_logprobs")}
    codes = _codes(_wire(_events(response=thin)))
    assert codes and set(codes) == {"schema.invalid_event"}


def test_other_dialects_are_not_held_to_open_responses() -> None:
    core = StreamCore(dialect="openai")
    core.feed(_wire(_events(), ids=True, done=False))
    core.close()
    assert core.violations == []
