"""upstream/responses/passed_items.py: a native upstream's hosted-tool and reasoning items become pass-through chunks,
and only the events that are valid in the stream the writer makes (the rest were counted as repairs by the core)."""

from __future__ import annotations

import json
from typing import Any

from respstream.protocol.events import decode_event
from respstream.server.upstream.base import PassedItemDone, PassedItemEvent
from respstream.server.upstream.responses.passed_items import PassedItems


def feed(items: PassedItems, *events: dict[str, Any]) -> list[object]:
    out: list[object] = []
    for raw in events:
        got = items.take(decode_event(json.dumps(raw)))
        out.append(None if got is None else [(type(c).__name__, c.key, getattr(c, "type", None)) for c in got])
    return out


WS_ADDED = {"type": "response.output_item.added", "output_index": 0, "item": {"id": "ws_1", "type": "web_search_call"}}
WS_DONE = {
    "type": "response.output_item.done",
    "output_index": 0,
    "item": {"id": "ws_1", "type": "web_search_call", "status": "completed"},
}


def test_own_items_are_not_taken() -> None:
    items = PassedItems()
    assert feed(
        items,
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "m", "type": "message"}},
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "x"},
        {"type": "response.created", "response": {}},
    ) == [None, None, None]


def test_a_hosted_item_and_its_events_in_order_late_and_duplicate_ones_dropped() -> None:
    items = PassedItems()
    got = feed(
        items,
        WS_ADDED,
        WS_ADDED,
        {"type": "response.web_search_call.searching", "item_id": "ws_1", "output_index": 0},
        {"type": "response.web_search_call.completed", "item_id": "other", "output_index": 0},  # new id: index
        WS_DONE,
        {"type": "response.web_search_call.completed", "item_id": "ws_1"},
        WS_DONE,
    )
    assert got == [
        [("PassedItemAdded", 0, None)],
        [],
        [("PassedItemEvent", 0, "response.web_search_call.searching")],
        [("PassedItemEvent", 0, "response.web_search_call.completed")],
        [("PassedItemDone", 0, None)],
        [],
        [],
    ]
    assert items.open_count == 0


def test_a_done_without_added_opens_the_item_and_the_terminal_closes_what_is_open() -> None:
    items = PassedItems()
    assert feed(items, {"type": "response.output_item.done", "item": {"id": "cu_1", "type": "computer_call"}}) == [
        [("PassedItemAdded", 0, None), ("PassedItemDone", 0, None)]
    ]
    feed(
        items,
        {"type": "response.output_item.added", "item": {"id": "ig_1", "type": "image_generation_call"}},
        {"type": "response.output_item.added", "item": {"id": "rs_1", "type": "reasoning", "summary": []}},
    )
    closed = items.close([{"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "x"}])
    assert closed == [
        PassedItemDone(1, {"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "x"}),
        PassedItemDone(2, {"id": "rs_1", "type": "reasoning", "summary": [], "status": "incomplete"}),
    ]


def test_reasoning_parts_follow_their_own_life_and_keep_their_canonical_names() -> None:
    items = PassedItems()
    rs = {"item_id": "rs_1", "output_index": 0}
    got = feed(
        items,
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning"}},
        {"type": "response.content_part.added", **rs, "content_index": 0, "part": {"type": "reasoning_text"}},
        {"type": "response.reasoning.delta", **rs, "content_index": 0, "delta": "a"},  # Open Responses' name
        {"type": "response.reasoning_text.done", **rs, "content_index": 0, "text": "a"},
        {"type": "response.reasoning_text.delta", **rs, "content_index": 0, "delta": "late"},
        {"type": "response.reasoning_summary_text.delta", **rs, "summary_index": 0, "delta": "s"},
    )
    assert got[2] == [("PassedItemEvent", 0, "response.reasoning_text.delta")]
    assert got[4] == []  # a delta after its part's done
    assert got[5] == [("PassedItemEvent", 0, "response.reasoning_summary_text.delta")]


def test_an_event_keeps_its_fields_but_not_the_envelope() -> None:
    items = PassedItems()
    feed(
        items,
        {
            "type": "response.output_item.added",
            "output_index": 3,
            "item": {"id": "ig", "type": "image_generation_call"},
        },
    )
    chunks = items.take(
        decode_event(
            json.dumps(
                {
                    "type": "response.image_generation_call.partial_image",
                    "sequence_number": 9,
                    "item_id": "ig",
                    "output_index": 3,
                    "partial_image_b64": "AAA",
                    "partial_image_index": 0,
                }
            )
        )
    )
    assert chunks == [
        PassedItemEvent(
            0, "response.image_generation_call.partial_image", {"partial_image_b64": "AAA", "partial_image_index": 0}
        )
    ]
    unknown = items.take(
        decode_event(json.dumps({"type": "response.image_generation_call.future", "output_index": 3, "x": 1}))
    )
    assert unknown == [PassedItemEvent(0, "response.image_generation_call.future", {"x": 1}, item_id=False)]
