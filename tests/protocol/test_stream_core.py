"""StreamCore: chunking never matters, the inlined fast path equals the plain pipeline, bad input says where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from respstream.errors import BadInputError, EventTooLarge
from respstream.protocol import Assembler, RuleChecker, Sequencer, StreamCore, decode_event
from respstream.protocol.events import Event
from respstream.protocol.sse import SSEDecoder

TRANSCRIPTS = Path(__file__).parent.parent / "transcripts"
GOOD = sorted(p.stem for p in TRANSCRIPTS.glob("*.sse")
              if p.stem not in {"html_page", "invalid_json", "not_object", "json_error_body", "empty"})
WINDOW = {"reorder_beyond_window": 2}
STARTING_AFTER = {"resumed": 9}


def core_for(name: str) -> StreamCore:
    return StreamCore(window=WINDOW.get(name, 64), starting_after=STARTING_AFTER.get(name))


def feed_in_steps(core: StreamCore, data: bytes, step: int) -> list[Event]:
    out: list[Event] = []
    for i in range(0, len(data), step):
        core.feed(data[i : i + step])
        out += core.events()
    core.close()
    return out + core.events()


def reference(name: str, data: bytes) -> dict[str, Any]:
    """The same pipeline without StreamCore's inlined fast path: decoder, sequencer, checker, assembler."""
    dec = SSEDecoder()
    dec.feed(data)
    dec.close()
    seq = Sequencer(window=WINDOW.get(name, 64), starting_after=STARTING_AFTER.get(name))
    asm = Assembler()
    rules = RuleChecker(asm, expect_created=name not in STARTING_AFTER)
    violations = []
    for msg in dec.events():
        if msg.data == b"[DONE]":
            continue
        released = seq.push(decode_event(msg.data))
        violations += seq.drain_violations()
        for event in released:
            violations += rules.check(event)
            asm.feed(event)
    for event in seq.close():
        violations += seq.drain_violations()
        violations += rules.check(event)
        asm.feed(event)
    violations += seq.drain_violations()
    violations += rules.finish()
    return asm.result(violations).to_json()


@pytest.mark.parametrize("name", GOOD)
def test_chunking_never_changes_anything(name: str) -> None:
    data = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    whole = core_for(name)
    events_whole = feed_in_steps(whole, data, len(data))
    for step in (1, 7, 64):
        core = core_for(name)
        assert feed_in_steps(core, data, step) == events_whole
        assert core.result.to_json() == whole.result.to_json()


@pytest.mark.parametrize("name", GOOD)
def test_fast_path_equals_the_plain_pipeline(name: str) -> None:
    data = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    core = core_for(name)
    feed_in_steps(core, data, 4096)
    mine = core.result.to_json()
    ref = reference(name, data)
    assert [v["code"] for v in mine["violations"]] == [v["code"] for v in ref["violations"]]
    assert mine == ref


def delta(seq: int, text: str, oi: int = 0, ci: int = 0, item_id: str = "m") -> bytes:
    obj = {"type": "response.output_text.delta", "sequence_number": seq, "item_id": item_id, "output_index": oi,
           "content_index": ci, "delta": text}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


HEAD = frame({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "model": "m"}}) + frame(
    {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
     "item": {"id": "m", "type": "message", "content": []}}
) + frame({"type": "response.content_part.added", "sequence_number": 2, "item_id": "m", "output_index": 0,
           "content_index": 0, "part": {"type": "output_text", "text": ""}})


def test_long_stream_is_compacted_and_exact() -> None:
    n = 20_000
    body = HEAD + b"".join(delta(3 + i, f"{i % 10}") for i in range(n))
    core = StreamCore()
    feed_in_steps(core, body, 65536)
    expected = "".join(f"{i % 10}" for i in range(n))
    assert core.result.streamed_text == expected
    assert core.result.output_text == expected
    assert len(core.assembler.streamed) < 50  # joined in blocks, not one object per delta
    assert [v.code for v in core.violations] == ["lifecycle.no_terminal"]


def test_fast_path_switches_parts_and_sees_late_events() -> None:
    body = HEAD + delta(3, "a") + delta(4, "b") + delta(5, "x", ci=1) + delta(6, "c") + delta(8, "e") + delta(7, "d")
    body += delta(9, "f", item_id="other")  # index mismatch: reported once, text still keyed by indices
    body += delta(10, "g", item_id="other")
    body += frame({"type": "response.completed", "sequence_number": 11, "response": {"status": "completed"}})
    body += delta(12, "late")
    core = StreamCore()
    feed_in_steps(core, body, 3)
    assert core.result.streamed_text == "abxcdefg"
    assert core.result.output[0]["content"][0]["text"] == "abcdefg"
    assert core.result.output[0]["content"][1]["text"] == "x"
    codes = [v.code for v in core.violations]
    assert codes == ["sequence.out_of_order", "item.index_mismatch", "item.not_done", "lifecycle.terminal_not_last"]
    assert core.terminal and core.status == "completed" and core.last_sequence_number == 12


@pytest.mark.parametrize(
    ("body", "number", "offset", "text"),
    [
        (b"<html><body>502</body></html>", 1, 0, "markup"),
        (b"\xef\xbb\xbf  \n<!doctype html>", 1, 6, "markup"),
        (b"data: {}\n\ndata: nope\n\n", 2, 10, "not valid JSON"),
        (b"data: 42\n\n", 1, 0, "number"),
        (b"data: \xff\xfe\n\n", 1, 0, "JSON"),
        (b": only a comment\n\n", 1, 18, "no Server-Sent Event"),
        (b"data: [DONE]\n\n", 1, 14, "no Server-Sent Event"),
    ],
)
def test_bad_input_names_event_and_offset(body: bytes, number: int, offset: int, text: str) -> None:
    core = StreamCore()
    with pytest.raises(BadInputError, match=text) as info:
        feed_in_steps(core, body, 1)
    assert (info.value.event_number, info.value.byte_offset) == (number, offset)
    assert f"event {number} at byte {offset}" in str(info.value)


def test_html_after_whitespace_only_chunks() -> None:
    core = StreamCore()
    core.feed(b"  \r\n")
    core.feed(b"\t")
    with pytest.raises(BadInputError) as info:
        core.feed(b"<html>")
    assert info.value.byte_offset == 5


def test_event_too_large_keeps_earlier_events_and_says_where() -> None:
    core = StreamCore(max_event_size=1000)
    first = frame({"type": "response.created", "sequence_number": 0, "response": {}})
    with pytest.raises(EventTooLarge) as info:
        core.feed(first + b"data: " + b"x" * 5000)
    assert info.value.event_number == 2 and info.value.byte_offset == len(first)
    assert [e.type for e in core.events()] == ["response.created"]


def test_options_and_lifecycle_errors() -> None:
    with pytest.raises(ValueError, match="dialect"):
        StreamCore(dialect="klingon")
    core = StreamCore()
    core.feed(HEAD)
    core.close()
    core.close()  # idempotent
    assert core.closed
    with pytest.raises(ValueError, match="after close"):
        core.feed(b"data: {}\n\n")


def test_result_is_cached_until_something_changes() -> None:
    core = StreamCore()
    core.feed(HEAD)
    first = core.result
    assert core.result is first
    core.feed(delta(3, "z"))
    assert core.result is not first and core.result.streamed_text == "z"


def test_violations_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("respstream.protocol.stream.MAX_VIOLATIONS", 3)
    core = StreamCore()
    core.feed(b"".join(frame({"type": "response.created", "sequence_number": 0}) for _ in range(10)))
    core.close()
    assert len(core.violations) == 3 and core.violations_dropped == 8  # 9 duplicates, 1 field, no_terminal


def test_reconnect_continues_across_the_seam_without_duplicates() -> None:
    body = HEAD + delta(3, "a") + delta(4, "b")
    core = StreamCore()
    core.feed(body + delta(5, "c")[:10])  # the connection drops mid-event
    assert [e.sequence_number for e in core.events()] == [0, 1, 2, 3, 4]
    core.reconnect()
    core.feed(delta(4, "b") + delta(5, "c"))  # the resumed stream overlaps by one event
    core.feed(frame({"type": "response.completed", "sequence_number": 6, "response": {"status": "completed"}}))
    core.close()
    assert [e.sequence_number for e in core.events()] == [5, 6]
    assert core.result.streamed_text == "abc"
    assert [v.code for v in core.violations] == ["sequence.duplicate", "item.not_done"]
    with pytest.raises(ValueError, match="after close"):
        core.reconnect()


def test_starting_after_below_minus_one_is_refused_and_minus_one_is_the_whole_stream() -> None:
    with pytest.raises(ValueError, match="starting_after must be -1 or more"):
        StreamCore(starting_after=-2)
    assert StreamCore(starting_after=-1).rules.expect_created is True
    assert StreamCore(starting_after=0).rules.expect_created is False
