"""The event families OpenAI added after the 58 (compaction, rate limits, steering) through the rules and assembly."""

from __future__ import annotations

import json

from respstream.protocol.stream import StreamCore


def _core(*events: dict[str, object], dialect: str | None = None) -> StreamCore:
    core = StreamCore(dialect=dialect)
    for n, event in enumerate(events):
        core.feed(f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': n})}\n\n".encode())
    core.close()
    return core


CREATED = {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}
COMPLETED = {"type": "response.completed", "response": {"id": "r", "status": "completed"}}
ERROR = {"type": "error", "code": "server_error", "message": "boom"}
FAILED = {"type": "response.failed", "response": {"id": "r", "status": "failed"}}
RATE = {"type": "response.rate_limits.updated", "rate_limits": [{"name": "requests", "remaining": 1}]}
PENDING = {"type": "response.steer.pending", "steer": {"id": "st_1", "previous_response_id": "r"},
           "reason": "waiting_for_required_input", "required_input": []}


def test_notices_after_the_terminal_are_not_violations() -> None:
    core = _core(CREATED, COMPLETED, RATE, PENDING, dialect="openai")
    assert core.violations == []
    assert core.status == "completed"
    assert core.result.events == 4


def test_other_events_after_the_terminal_still_are() -> None:
    core = _core(CREATED, COMPLETED, RATE, {"type": "response.steer.accepted", "steer": {"id": "s"}})
    assert [v.code for v in core.violations] == ["lifecycle.terminal_not_last"]
    assert core.violations[0].sequence_number == 3


def test_a_notice_between_error_and_its_failed_keeps_them_one_terminal() -> None:
    core = _core(CREATED, ERROR, RATE, FAILED)
    assert core.violations == []
    assert core.status == "failed"


def test_compaction_is_an_item_event() -> None:
    item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "x"}
    core = _core(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.compaction.compacting", "item_id": "cmp_1", "output_index": 0},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.compaction.compacting", "item_id": "cmp_1", "output_index": 0},
        COMPLETED,
    )
    assert [v.code for v in core.violations] == ["item.delta_after_done"]
    core = _core(CREATED, {"type": "response.compaction.compacting", "output_index": 0}, COMPLETED)
    assert [v.code for v in core.violations] == ["envelope.missing_field", "item.delta_before_added", "item.not_done"]


def test_index_mismatch_once_per_item_however_many_ids() -> None:
    added = {"type": "response.output_item.added", "output_index": 0,
             "item": {"id": "m0", "type": "message", "content": []}}
    deltas = [{"type": "response.output_text.delta", "item_id": f"m{k}", "output_index": 0, "content_index": 0,
               "delta": "x"} for k in range(1, 30)]
    other = {"type": "response.output_item.added", "output_index": 1,
             "item": {"id": "n0", "type": "message", "content": []}}
    more = [{"type": "response.output_text.delta", "item_id": f"n{k}", "output_index": 1, "content_index": 0,
             "delta": "y"} for k in range(1, 30)]
    core = _core(CREATED, added, *deltas, other, *more, {"type": "response.incomplete", "response": {"id": "r"}})
    assert [v.code for v in core.violations] == ["item.index_mismatch", "item.index_mismatch"]
    assert core.result.output_text == "x" * 29 + "y" * 29
