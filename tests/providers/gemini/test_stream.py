"""gemini/stream.py, the sans-IO half: Gemini chunks in, generation chunks out (no sockets)."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

from providers.gemini.conftest import CASES, PROVIDERS
from providers.gemini.simulated_gemini import sse_body
from respstream.protocol.sse import SSEDecoder
from respstream.server.upstream.base import (
    Finish,
    PassedItemAdded,
    PassedItemDone,
    PassedItemEvent,
    TextDelta,
    TextRun,
    ToolCallDelta,
    singles,
)
from respstream.server.upstream.gemini.reads import GeminiBody
from respstream.server.upstream.gemini.stream import GENERATED_CALL_PREFIX, GeminiStream


def _chunk(*parts: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate]}
    if usage:
        out["usageMetadata"] = usage
    return out


def _run(*chunks: dict[str, Any]) -> tuple[GeminiStream, list[Any]]:
    stream = GeminiStream(name="g")
    out: list[Any] = []
    for chunk in chunks:
        out += stream.feed(chunk)
    out += stream.finish()
    return stream, out


def test_thought_text_is_a_reasoning_summary_never_answer_text() -> None:
    stream, out = _run(_chunk({"text": "thinking...", "thought": True}),
                       _chunk({"text": "Answer", "thoughtSignature": "c2ln"}, finish="STOP"))
    assert stream.failure is None
    assert [c.text for c in out if isinstance(c, TextDelta)] == ["Answer"]
    deltas = [c.fields["delta"] for c in out if isinstance(c, PassedItemEvent)
              and c.type == "response.reasoning_summary_text.delta"]
    assert deltas == ["thinking..."]
    done = next(c for c in out if isinstance(c, PassedItemDone))
    assert done.item == {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking..."}],
                         "encrypted_content": "c2ln"}
    # the reasoning item closes before the signed text part it belongs to
    assert out.index(done) < next(i for i, c in enumerate(out) if isinstance(c, TextDelta))


def test_calls_without_ids_get_distinct_ids_and_two_calls_to_one_function_stay_two() -> None:
    _, out = _run(_chunk({"functionCall": {"name": "add", "args": {"a": 1}}},
                         {"functionCall": {"name": "add", "args": {"a": 2}}}, finish="STOP"))
    calls = [c for c in out if isinstance(c, ToolCallDelta)]
    assert [(c.index, c.name, c.arguments) for c in calls] == [(0, "add", '{"a":1}'), (1, "add", '{"a":2}')]
    assert calls[0].call_id != calls[1].call_id
    assert all(c.call_id and c.call_id.startswith(GENERATED_CALL_PREFIX) for c in calls)
    assert out[-1] == Finish("tool_calls")


def test_empty_args_are_an_empty_object_and_given_ids_are_kept() -> None:
    _, out = _run(_chunk({"functionCall": {"name": "now", "id": "abc"}}, finish="STOP"))
    call = next(c for c in out if isinstance(c, ToolCallDelta))
    assert (call.call_id, call.arguments) == ("abc", "{}")


@pytest.mark.parametrize(("reason", "finish"), [("STOP", "stop"), ("MAX_TOKENS", "length"),
                                                ("SAFETY", "content_filter"), ("RECITATION", "content_filter"),
                                                ("PROHIBITED_CONTENT", "content_filter"), ("SPII", "content_filter"),
                                                ("BLOCKLIST", "content_filter")])
def test_finish_reasons(reason: str, finish: str) -> None:
    stream, out = _run(_chunk({"text": "x"}, finish=reason))
    assert stream.failure is None and out[-1] == Finish(finish)


@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "OTHER", "FINISH_REASON_UNSPECIFIED"])
def test_other_finish_reasons_fail_never_complete(reason: str) -> None:
    stream, out = _run(_chunk({"text": "x"}, finish=reason))
    assert not any(isinstance(c, Finish) for c in out)
    assert stream.failure is not None and reason in stream.failure.message
    assert stream.failure.before_first_token is False  # text was given out before


def test_usage_is_the_last_one_never_summed_and_cached_tokens_count() -> None:
    _, out = _run(_chunk({"text": "a"}, usage={"promptTokenCount": 100, "candidatesTokenCount": 1}),
                  _chunk({"text": "b"}, finish="STOP", usage={
                      "promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 2,
                      "thoughtsTokenCount": 5, "totalTokenCount": 107}))
    usage = out[-1].usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cached_tokens) == (100, 7, 5, 60)


def test_an_error_in_the_stream_fails_with_its_status() -> None:
    stream, out = _run(_chunk({"text": "partial"}),
                       {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})
    assert [c.text for c in out if isinstance(c, TextDelta)] == ["partial"]
    assert stream.failure is not None and "UNAVAILABLE" in stream.failure.message
    assert "overloaded" in stream.failure.message


def test_a_stream_without_finish_reason_is_cut_and_closes_its_reasoning() -> None:
    stream, out = _run(_chunk({"text": "hmm", "thought": True}))
    assert isinstance(out[0], PassedItemAdded) and isinstance(out[-1], PassedItemDone)
    assert stream.failure is not None and "cut" in stream.failure.message


def test_a_blocked_prompt_is_content_filter() -> None:
    _, out = _run({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    assert out == [Finish("content_filter", usage=out[-1].usage)] and out[-1].usage.input_tokens == 3


def test_an_event_that_is_not_an_object_fails_naming_it() -> None:
    stream = GeminiStream(name="g")
    assert stream.feed([1, 2]) == []
    assert stream.failure is not None and "event 1" in stream.failure.message


def _translate(body: bytes, step: int) -> list[Any]:
    decoder, stream, out = SSEDecoder(), GeminiStream(name="g", new_id=lambda: "fixed"), []
    for at in range(0, len(body), step):
        decoder.feed(body[at:at + step])
        for message in decoder.events():
            out += stream.feed(msgspec.json.decode(message.data))
    decoder.close()
    for message in decoder.events():
        out += stream.feed(msgspec.json.decode(message.data))
    return out + stream.finish()


@pytest.mark.parametrize("case", [c for c in CASES if c["http_status"] == 200], ids=lambda c: c["case"])
def test_every_recording_gives_the_same_chunks_byte_by_byte_and_whole(case: dict[str, Any]) -> None:
    body = (PROVIDERS / case["file"]).read_bytes()
    whole = _translate(body, len(body))
    assert _translate(body, 1) == whole
    text = "".join(c.text for c in whole if isinstance(c, TextDelta))
    if case["expect"]["output_text"] is None:  # a cut stream: no Finish, ever
        assert text and not any(isinstance(c, Finish) for c in whole)
    else:
        assert text == case["expect"]["output_text"]
        assert isinstance(whole[-1], Finish)


def _through_body(body: bytes, cuts: list[int]) -> list[Any]:
    reader = GeminiBody(GeminiStream(name="g", new_id=lambda: "fixed"))
    out: list[Any] = []
    for start, end in itertools.pairwise([0, *cuts, len(body)]):
        out += reader.feed(body[start:end])
    return list(singles(out + reader.finish()))  # (a read of many tokens is one TextRun)


@pytest.mark.parametrize("case", [c for c in CASES if c["http_status"] == 200], ids=lambda c: c["case"])
def test_the_body_reader_lanes_give_what_the_full_path_gives(case: dict[str, Any]) -> None:
    """gemini/reads.py: its event split and typed text lane (whole events a read) and the SSE decoder (reads cut
    anywhere, one byte a read) give the chunks of the plain path (SSE decoder + JSON + ``feed``), usage included."""
    body = (PROVIDERS / case["file"]).read_bytes()
    want = _translate(body, len(body))
    per_event = [at + 4 for at in range(len(body)) if body.startswith(b"\r\n\r\n", at)][:-1]
    assert _through_body(body, per_event) == want
    assert _through_body(body, list(range(1, len(body)))) == want
    assert _through_body(body, [len(body) // 3, len(body) // 2]) == want
    assert _through_body(body, per_event[1::3]) == want  # (whole events, three a read)


def test_the_text_lane_takes_only_bare_text() -> None:
    """A chunk with anything beside bare text (a thought, a signature, a finish) goes the full way."""
    reader = GeminiBody(GeminiStream(name="g"))
    assert reader.feed(sse_body(_chunk({"text": "a"}))) == [TextDelta("a")]
    out = reader.feed(sse_body(_chunk({"text": "b", "thought": True})))
    assert isinstance(out[0], PassedItemAdded) and not any(isinstance(c, TextDelta) for c in out)
    out = reader.feed(sse_body(_chunk({"text": "c"}, finish="STOP", usage={"promptTokenCount": 2})))
    assert isinstance(out[-1], Finish) and out[-1].usage.input_tokens == 2
    assert [c.text for c in out if isinstance(c, TextDelta)] == ["c"]


def test_a_read_of_many_text_events_is_one_run_and_usage_is_the_last() -> None:
    reader = GeminiBody(GeminiStream(name="g"))
    events = [_chunk({"text": f"t{i}"}, usage={"promptTokenCount": 1, "candidatesTokenCount": i}) for i in range(5)]
    assert reader.feed(sse_body(*events)) == [TextRun([f"t{i}" for i in range(5)])]
    out = reader.feed(sse_body(_chunk({"text": "end"}, {"text": "z", "thought": True}, finish="STOP")))
    assert isinstance(out[-1], Finish) and out[-1].usage is not None and out[-1].usage.output_tokens == 4
