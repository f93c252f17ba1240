"""The Anthropic stream state machine alone (upstream/anthropic/stream.py, body.py), without IO: every recording
gives the same chunks fed whole, byte by byte and in random pieces (UTF-8 characters and CRLF pairs split), and the
edge cases each rule of expected.json names."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from respstream.server.upstream.anthropic.body import AnthropicBody
from respstream.server.upstream.anthropic.stream import AnthropicStream
from respstream.server.upstream.base import (
    Finish,
    PassedItemAdded,
    PassedItemDone,
    PassedItemEvent,
    TextDelta,
    TextRun,
    ToolCallDelta,
    Usage,
)

from .conftest import CASES, SEED, body_of

STREAMS = sorted(name for name, c in CASES.items() if c["content_type"].startswith("text/event-stream"))


def run(pieces: list[bytes]) -> tuple[list[Any], AnthropicStream]:
    stream = AnthropicStream(name="sim")
    body = AnthropicBody(stream)
    out: list[Any] = []
    for piece in pieces:
        out += body.feed(piece)
    out += body.end()
    return merged(out), stream


def merged(chunks: list[Any]) -> list[Any]:
    """Consecutive text deltas joined (how a read cuts them is not part of the outcome)."""
    out: list[Any] = []
    for chunk in chunks:
        if isinstance(chunk, TextDelta) and out and isinstance(out[-1], TextDelta):
            out[-1] = TextDelta(out[-1].text + chunk.text)
        elif isinstance(chunk, PassedItemEvent) and chunk.type.endswith("text.delta") and out \
                and isinstance(out[-1], PassedItemEvent) and out[-1].type == chunk.type:
            out[-1] = PassedItemEvent(chunk.key, chunk.type, {**chunk.fields,
                                                              "delta": out[-1].fields["delta"] + chunk.fields["delta"]})
        else:
            out.append(chunk)
    return out


def random_pieces(data: bytes, rng: random.Random) -> list[bytes]:
    pieces, at = [], 0
    while at < len(data):
        size = rng.randint(1, 9)
        pieces.append(data[at : at + size])
        at += size
    return pieces


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("name", STREAMS)
def test_any_chunking_gives_the_same_chunks(name: str, crlf: bool) -> None:
    data = body_of(CASES[name])
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    whole, whole_state = run([data])
    assert run([data[i : i + 1] for i in range(len(data))])[0] == whole
    frame = b"\r\n\r\n" if crlf else b"\n\n"
    one_event_a_read = [e + frame for e in data.split(frame) if e]  # (text deltas take the body's text lane)
    assert run(one_event_a_read)[0] == whole
    rng = random.Random(SEED)
    for _ in range(5):
        assert run(random_pieces(data, rng))[0] == whole, f"seed {SEED}"
    want = CASES[name]["expect"]
    text = "".join(c.text for c in whole if isinstance(c, TextDelta))
    if want["output_text"] is not None and want["status"] != "failed":
        assert text == want["output_text"]
    assert (whole_state.failure is not None) == (want["status"] == "failed" or want["status"] is None)


def feed(*events: dict[str, Any]) -> tuple[list[Any], AnthropicStream]:
    data = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    return run([data])


START = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 1}}}
STOP = {"type": "message_stop"}


def delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": fields}


def block(index: int, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": fields}


def end_of(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def stop(reason: str, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}


def test_usage_running_totals_taken_last_and_cache_counted_in() -> None:
    chunks, _ = feed({"type": "message_start", "message": {"usage": {
        "input_tokens": 4, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": 1}}},
        stop("end_turn", output_tokens=7), stop("end_turn", output_tokens=9, cache_read_input_tokens=1000), STOP)
    assert chunks == [Finish("stop", Usage(input_tokens=1104, output_tokens=9, cached_tokens=1000))]


@pytest.mark.parametrize(("reason", "finish"), [("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"),
                                                ("max_tokens", "length"), ("refusal", "content_filter"),
                                                ("a_reason_added_later", "stop")])
def test_stop_reasons(reason: str, finish: str) -> None:
    chunks, _ = feed(START, stop(reason), STOP)
    assert chunks[-1].reason == finish


def test_tool_input_given_whole_and_empty_arguments() -> None:
    chunks, _ = feed(START, block(0, type="tool_use", id="toolu_a", name="f", input={"x": 1}), end_of(0),
                     block(1, type="tool_use", id="toolu_b", name="f", input={}), delta(1, type="input_json_delta",
                                                                                       partial_json=""),
                     end_of(1), stop("tool_use"), STOP)
    assert chunks[:2] == [ToolCallDelta(0, "toolu_a", "f", '{"x": 1}'), ToolCallDelta(1, "toolu_b", "f", "{}")]
    assert chunks[2].reason == "tool_calls"


def test_a_tool_call_cut_by_max_tokens_is_left_out() -> None:
    chunks, stream = feed(START, block(0, type="tool_use", id="toolu_a", name="f", input={}),
                          delta(0, type="input_json_delta", partial_json='{"a": "b'), stop("max_tokens"), STOP)
    assert chunks == [Finish("length", Usage(input_tokens=10, output_tokens=1))]
    assert stream.failure is None


def test_thinking_without_text_still_carries_its_signature() -> None:
    chunks, stream = feed(START, block(0, type="thinking", thinking="", signature=""),
                          delta(0, type="signature_delta", signature="SIG"), end_of(0), stop("end_turn"), STOP)
    assert isinstance(chunks[0], PassedItemAdded)
    done = chunks[1]
    assert isinstance(done, PassedItemDone)
    assert done.item["encrypted_content"] == "SIG" and done.item["summary"] == [{"type": "summary_text", "text": ""}]
    assert stream.failure is None


def test_thinking_open_at_max_tokens_is_closed_incomplete() -> None:
    chunks, _ = feed(START, block(0, type="thinking", thinking="", signature=""),
                     delta(0, type="thinking_delta", thinking="hmm"), stop("max_tokens"), STOP)
    done = [c for c in chunks if isinstance(c, PassedItemDone)]
    assert done[0].item["status"] == "incomplete" and done[0].item["summary"][0]["text"] == "hmm"
    assert chunks[-1].reason == "length"


def test_error_event_fails_with_the_providers_type() -> None:
    chunks, stream = feed(START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert chunks == []
    assert stream.failure is not None and stream.failure.status == 529 and stream.failure.before_first_token
    assert "overloaded_error" in stream.failure.message


def test_not_json_names_the_event_and_byte() -> None:
    stream = AnthropicStream(name="sim")
    body = AnthropicBody(stream)
    body.feed(b'event: ping\ndata: {"type": "ping"}\n\nevent: x\ndata: {oops\n\n')
    assert stream.failure is not None
    assert "event 2" in stream.failure.message and "byte 36" in stream.failure.message  # (where its block starts)


def test_unknown_events_and_blocks_are_tolerated() -> None:
    chunks, stream = feed(START, {"type": "a_future_event"}, block(0, type="a_future_block"),
                          delta(0, type="a_future_delta"), end_of(0), block(1, type="text", text=""),
                          delta(1, type="text_delta", text="hi"), end_of(1), stop("end_turn"), STOP)
    assert [c for c in chunks if not isinstance(c, Finish)] == [TextDelta("hi")]
    assert stream.failure is None


def test_the_text_lane_keeps_the_providers_rules() -> None:
    """Text deltas read one event a read (the lane) are text of an open text block only; a delta for a tool block
    and a CR-framed read take the general way, and the error offsets count the bytes the lane took."""
    events = [START, block(0, type="text", text=""), delta(0, type="text_delta", text="a"),
              delta(0, type="text_delta", text="b"), end_of(0), block(1, type="tool_use", id="t", name="f", input={}),
              delta(1, type="input_json_delta", partial_json="{}"), end_of(1), stop("tool_use"), STOP]
    reads = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    assert run(reads)[0] == run([b"".join(reads)])[0]
    stream = AnthropicStream(name="sim")
    body = AnthropicBody(stream)
    assert [body.feed(read) for read in reads[:3]] == [[], [], [TextDelta("a")]]
    assert body.feed(reads[2] + reads[3]) == [TextRun(["a", "b"])]
    body.feed(b"event: x\ndata: {oops\n\n")
    assert stream.failure is not None
    assert f"byte {sum(map(len, reads[:3])) + len(reads[2] + reads[3])}" in stream.failure.message


def test_a_data_line_of_two_json_values_is_not_json_in_the_lane_either() -> None:
    stream = AnthropicStream(name="sim")
    body = AnthropicBody(stream)
    opening = [START, block(0, type="text", text="")]
    body.feed(b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in opening))
    one = json.dumps(delta(0, type="text_delta", text="a"))
    assert body.feed(f"event: content_block_delta\ndata: {one},{one}\n\n".encode()) == []
    assert stream.failure is not None and "not JSON" in stream.failure.message


def test_events_after_message_stop_are_ignored() -> None:
    chunks, _ = feed(START, stop("end_turn"), STOP, block(0, type="text", text=""), delta(0, type="text_delta",
                                                                                         text="late"))
    assert not any(isinstance(c, TextDelta) for c in chunks)
