"""Fuzz: arbitrary bytes and arbitrary JSON never raise anything but the documented BadInputError family."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from respstream.errors import BadInputError
from respstream.protocol import RuleChecker, StreamCore
from respstream.protocol.events import ALL_EVENT_TYPES, decode_event

TYPES = [*sorted(ALL_EVENT_TYPES), "keepalive", "", "response.future_thing"]
FIELDS = ["sequence_number", "output_index", "content_index", "summary_index", "annotation_index", "item_id",
          "delta", "text", "refusal", "arguments", "name", "item", "part", "response", "code", "message", "error",
          "command_index", "command", "output", "input", "partial_image_b64", "annotation"]
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.text(max_size=5))
JSONV = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["id", "type", "status", "text", "content", "output", "arguments", "summary", "code", "message",
         "output_text", "usage", "error", "incomplete_details", "model", "call_id", "name"]), inner, max_size=4)),
    max_leaves=8,
)
EVENT = st.fixed_dictionaries({"type": st.sampled_from(TYPES)}, optional={f: JSONV for f in FIELDS})


def run(body: bytes, step: int, **options: Any) -> None:
    core = StreamCore(**options)
    try:
        for i in range(0, len(body), step):
            core.feed(body[i : i + step])
            core.events()
        core.close()
        result = core.result.to_json()
        json.dumps(result)  # always serialisable
        assert result["status"] in {"completed", "incomplete", "failed", "error", "cancelled", "truncated"}
    except BadInputError as exc:
        assert exc.event_number is not None and exc.byte_offset is not None
        assert "\n" not in str(exc)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(1, 50))
def test_arbitrary_bytes(body: bytes, step: int) -> None:
    run(body, step)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENT, max_size=25), st.integers(1, 200), st.sampled_from([None, "platform", "openai"]),
       st.sampled_from([None, 0, 3]), st.integers(1, 4))
def test_arbitrary_event_sequences(
    events: list[dict[str, Any]], step: int, dialect: str | None, starting_after: int | None, window: int
) -> None:
    body = b"".join(b"event: " + str(e["type"]).encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n"
                    for e in events)
    run(body, step, dialect=dialect, starting_after=starting_after, window=window)


@settings(max_examples=100, deadline=None)
@given(st.lists(EVENT, max_size=25))
def test_rule_checker_standalone_never_raises(events: list[dict[str, Any]]) -> None:
    checker = RuleChecker()
    for obj in events:
        for v in checker.check(decode_event(json.dumps(obj).encode())):
            assert v.code.count(".") == 1 and v.message
    checker.finish()
    assert checker.assembler.result(checker.violations).to_json()["events"] == len(events)


@settings(max_examples=100, deadline=None)
@given(JSONV)
def test_arbitrary_json_values_as_data(value: Any) -> None:
    run(b"data: " + json.dumps(value).encode() + b"\n\n", 5)
