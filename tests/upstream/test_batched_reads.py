"""The adapter's batched reads: one list of chunks per read of the body, the same chunks as one by one, no waiting.

The de-chunker and the whole-``data:``-events splitter are checked against plain reference implementations (written
here, the obvious way) on generated inputs; ``generate_batches`` against the SIMULATED Chat Completions server over
real loopback HTTP, against the chunks a fresh translator makes of the same payloads one at a time.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.chat_server import Done, FakeChatCompletionsServer, Raw, Sleep, finish, text, usage
from respstream.server.upstream.base import Chunk, GenerationRequest, TextDelta, singles
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.chat_wire import simple_data_events
from respstream.server.upstream.http.connection import Dechunker, ProtocolError, UpstreamConnection

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}])


def _reference_simple(raw: bytes) -> list[bytes] | None:
    """Block by block: every block one ``data: `` line, LF framing, whole events only."""
    if not raw.startswith(b"data: ") or not raw.endswith(b"\n\n") or b"\r" in raw:
        return None
    payloads = []
    for block in raw[:-2].split(b"\n\n"):
        if not block.startswith(b"data: ") or b"\n" in block:
            return None
        payloads.append(block[6:])
    return payloads


_sse_piece = st.sampled_from([b"data: ", b"data:", b"\n", b"\n\n", b"\r", b"event: x", b": c", b"{}", b"A", b"[DONE]",
                              b"data: {\"a\":1}\n\n", b" "])


@settings(max_examples=2000, deadline=None)
@given(st.lists(_sse_piece, max_size=12).map(b"".join))
def test_simple_data_events_agrees_with_the_block_by_block_reference(raw: bytes) -> None:
    assert simple_data_events(raw) == _reference_simple(raw)


def _chunked(pieces: list[bytes], extension: bool, trailers: bool) -> bytes:
    out = b"".join(b"%x%b\r\n%b\r\n" % (len(p), b";name=value" if extension else b"", p) for p in pieces if p)
    return out + b"0\r\n" + (b"x-trailer: 1\r\n" if trailers else b"") + b"\r\n"


def _body_conn(fast: bool) -> UpstreamConnection:
    """A connection past a ``chunked`` response head: de-chunking with httptools (``fast``) or the Python loop."""
    conn = UpstreamConnection(("http", "x", 1), max_buffer=1 << 30)
    conn._in_body = True
    conn._chunked = True
    conn._dechunker = Dechunker(conn) if fast else None
    return conn


def _feed(data: bytes, cuts: list[int], fast: bool) -> tuple[bytes, UpstreamConnection]:
    conn = _body_conn(fast)
    out = b""
    start = 0
    for cut in [*sorted({c % (len(data) + 1) for c in cuts}), len(data)]:
        if cut > start:
            conn._body(data[start:cut])
            start = cut
        if conn.pieces:
            out += conn.take()
    return out, conn


@settings(max_examples=500, deadline=None)
@given(
    pieces=st.lists(st.binary(max_size=40) | st.just(b"\r\n") | st.just(b"0\r\n\r\n"), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    extension=st.booleans(),
    trailers=st.booleans(),
    fast=st.booleans(),
)
def test_dechunking_any_read_boundaries_gives_the_body(pieces: list[bytes], cuts: list[int], extension: bool,
                                                      trailers: bool, fast: bool) -> None:
    body, conn = _feed(_chunked(pieces, extension, trailers), cuts, fast)
    assert body == b"".join(pieces)
    assert conn.eof and conn.error is None and conn.buffered == 0


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("size_line", [b"-5", b"zz", b"; only-an-extension"])
def test_a_bad_chunk_size_is_a_protocol_error(size_line: bytes, fast: bool) -> None:
    conn = _body_conn(fast)
    conn._body(size_line + b"\r\nabc\r\n")
    assert isinstance(conn.error, ProtocolError) and "bad chunk" in str(conn.error)


def test_a_chunked_response_is_dechunked_by_httptools_when_installed() -> None:
    conn = UpstreamConnection(("http", "x", 1), max_buffer=1 << 20)
    conn.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
    assert conn._dechunker is not None  # the fast extra is in the default install
    assert conn.take() == b"abc" and conn.eof


class _Transport:
    """Records pause/resume (a connection's back-pressure), nothing else."""

    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False


@pytest.mark.parametrize("fast", [True, False])
def test_reading_pauses_past_max_buffer_and_resumes_on_take(fast: bool) -> None:
    conn = UpstreamConnection(("http", "x", 1), max_buffer=100)
    transport = _Transport()
    conn.transport = transport  # type: ignore[assignment]
    conn.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    if not fast:
        conn._dechunker = None
    conn.data_received(b"28\r\n" + b"x" * 40 + b"\r\n")
    conn.data_received(b"28\r\n" + b"y" * 40 + b"\r\n")
    assert not transport.paused  # 80 body bytes (and their framing) are under the bound
    conn.data_received(b"28\r\n" + b"z" * 40 + b"\r\n")
    assert transport.paused and conn.paused
    assert conn.take() == b"x" * 40 + b"y" * 40 + b"z" * 40
    assert not transport.paused and conn.buffered == 0
    conn.data_received(b"3\r\n")  # framing alone holds nothing for the reader
    assert conn.buffered == 0 and not transport.paused and transport.pauses == 1


def _payload(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def _content(value: str, reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": value}, "finish_reason": reason}]}


def _reference_chunks(payloads: list[bytes]) -> list[Chunk]:
    translator = ChunkTranslator()
    out: list[Chunk] = []
    for payload in payloads:
        out += translator.feed(payload)
        if translator.done:
            break
    return out + translator.finish()


def make(fake: FakeChatCompletionsServer) -> ChatCompletionsUpstream:
    return ChatCompletionsUpstream(fake.url, name="fake", idle_timeout=5.0, retry_backoff=0.01, models=["fake-model"])


@pytest.mark.parametrize("seed", range(12))
async def test_batches_hold_the_chunks_one_by_one_translation_gives(fake: FakeChatCompletionsServer,
                                                                    seed: int) -> None:
    import random

    rng = random.Random(seed)
    words = ["Hel", "lo", " <think>", "hm", "</think>", " wor", "ld", " é☃", "\\n", '"q"']
    payloads = [_payload(_content(rng.choice(words))) for _ in range(rng.randint(0, 60))]
    payloads += [_payload(_content("", "stop")), _payload(usage(3, 4).obj), b"[DONE]"]
    wire = b"".join(b"data: " + p + b"\n\n" for p in payloads)
    steps: list[Any] = []
    pos = 0
    while pos < len(wire):  # the same bytes in random pieces, some apart in time (separate reads)
        step = rng.randint(1, 400)
        steps.append(Raw(wire[pos : pos + step]))
        if rng.random() < 0.3:
            steps.append(Sleep(0.005))
        pos += step
    fake.script(*steps)
    upstream = make(fake)
    try:
        batches = [batch async for batch in upstream.generate_batches(REQUEST)]
    finally:
        await upstream.aclose()
    assert all(batches)  # never an empty batch
    assert [c for b in batches for c in singles(b)] == _reference_chunks(payloads)


async def test_a_batch_is_what_one_read_held_and_the_first_does_not_wait(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("first"), text(" one"), Sleep(0.8), text(" later"), finish(), Done())
    upstream = make(fake)
    try:
        started = time.monotonic()
        stream = upstream.generate_batches(REQUEST)
        first = await stream.__anext__()
        waited = time.monotonic() - started
        rest = [batch async for batch in stream]
    finally:
        await upstream.aclose()
    texts = [c.text for c in first if isinstance(c, TextDelta)]
    assert texts and "".join(texts) in ("first", "first one")  # only what had come: never " later"
    # It did not wait for the upstream's next bytes: " later" (0.8 s on) is not in the first batch (asserted above by
    # content, which a busy machine cannot change); the wall-clock bound is only a sanity check on a hang.
    assert waited < 10
    later = [c.text for b in rest for c in b if isinstance(c, TextDelta)]
    assert "".join(texts + later) == "first one later"


async def test_answer_filters_still_see_every_chunk_one_by_one(fake: FakeChatCompletionsServer) -> None:
    fake.script(*[text("again ") for _ in range(200)], finish(), Done())
    upstream = ChatCompletionsUpstream(fake.url, name="fake", idle_timeout=5.0, models=["fake-model"],
                                       loop_guard=True)
    try:
        batches = [batch async for batch in upstream.generate_batches(REQUEST)]
    finally:
        await upstream.aclose()
    assert all(len(b) == 1 for b in batches)  # through the filters: one chunk per step, as before
    assert batches[-1][0].reason == "repetition"  # type: ignore[union-attr]
    usage = batches[-1][0].usage  # type: ignore[union-attr]
    streamed = sum(1 for b in batches for c in b if isinstance(c, TextDelta))
    assert usage is not None and usage.output_tokens == streamed + 1
    assert usage.input_tokens > 0  # the fake has no tokenizer endpoint: an estimate, never 0


async def test_generate_is_the_batches_flattened(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("a"), text("b"), finish(), Done())
    upstream = make(fake)
    try:
        one_by_one = [c async for c in upstream.generate(REQUEST)]
        fake.script(text("a"), text("b"), finish(), Done())
        batched = [c async for b in upstream.generate_batches(REQUEST) for c in b]
    finally:
        await upstream.aclose()
    assert one_by_one == batched
    assert [type(c).__name__ for c in one_by_one] == ["TextDelta", "TextDelta", "Finish"]
    assert [c.text for c in one_by_one[:2]] == ["a", "b"]  # type: ignore[union-attr]
    assert one_by_one[-1].reason == "stop"  # type: ignore[union-attr]


_payload_choice = st.sampled_from([
    _payload(_content("plain")), _payload(_content(" é\\n\"q\"")), _payload(_content("")),
    _payload(_content("a <think>b")), _payload(_content("c", "stop")), _payload(_content("d", "length")),
    _payload({"choices": []}), _payload({"choices": [{"index": 0, "delta": None, "finish_reason": "stop"}]}),
    _payload({"choices": [{"index": 0, "delta": {"reasoning_content": "r"}}]}),
    _payload({"choices": [{"index": 0, "delta": {"refusal": "no"}}]}),
    _payload({"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": []}}]}),
    _payload({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {
        "name": "f", "arguments": "{}"}}]}}]}),
    _payload(usage(1, 2).obj), _payload({"error": {"message": "boom"}}),
    _payload({**usage(3, 4).obj, "choices": [{"index": 0, "delta": {"content": "u"}}]}),  # text and usage at once
    _payload({"choices": [{"index": 0, "delta": {"content": "e</think>f", "reasoning": ""}}]}),
    _payload({"choices": [{"index": 0, "delta": {"content": "g", "reasoning_content": "h"}}]}),
    _payload({"choices": [{"index": 0, "delta": {"content": 5}}]}),  # a wrong type: the lenient path
    b"[DONE]", b" [DONE] ", b'{"choices":[]},{"choices":[]}', b"not json", b"",
])


def _each(payloads: list[bytes]) -> tuple[list[Chunk] | str, bool]:
    translator = ChunkTranslator()
    out: list[Chunk] = []
    try:
        for payload in payloads:
            out += translator.feed(payload)
            if translator.done:
                break
        return out + translator.finish(), translator.done
    except ValueError as exc:
        return str(exc), translator.done


@settings(max_examples=3000, deadline=None)
@given(st.lists(_payload_choice, max_size=10))
def test_feed_plain_then_one_by_one_is_feed_one_by_one(payloads: list[bytes]) -> None:
    translator = ChunkTranslator()
    got: list[Chunk] | str
    try:
        batch, taken = translator.feed_plain(payloads)
        assert 0 <= taken <= len(payloads)
        out = list(singles(batch))
        for payload in payloads[taken:]:
            if translator.done:
                break
            out += translator.feed(payload)
        got = out + translator.finish()
    except ValueError as exc:
        got = str(exc)
    assert (got, translator.done) == _each(payloads)


def test_feed_plain_takes_a_whole_plain_read_including_finish_usage_and_done() -> None:
    payloads = [_payload(_content(w)) for w in ("a", "b", "c")]
    payloads += [_payload(_content("", "stop")), _payload(usage(2, 3).obj), b"[DONE]"]
    translator = ChunkTranslator()
    out, taken = translator.feed_plain(payloads)
    assert taken == len(payloads) and translator.done
    assert out == [TextDelta("a"), TextDelta("b"), TextDelta("c")]


def test_feed_plain_takes_reasoning_tool_calls_think_tags_and_logprobs_whole() -> None:
    """Every chunk of a read is decoded once (in the one list decode), whatever it carries: only an error chunk
    ends the part, so the one-by-one path raises it with its number."""
    payloads = [
        _payload({"choices": [{"index": 0, "delta": {"reasoning_content": "r"}}]}),
        _payload(_content("a <think>b")), _payload(_content("</think>c")),
        _payload({"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": []}}]}),
        _payload({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {
            "name": "f", "arguments": "{}"}}]}}]}),
        _payload({"choices": [{"index": 0, "delta": {"refusal": "no"}}]}),
    ]
    translator = ChunkTranslator()
    out, taken = translator.feed_plain(payloads)
    assert taken == len(payloads)
    reference = ChunkTranslator()
    assert out == [chunk for payload in payloads for chunk in reference.feed(payload)]
    assert len(out) == 7 and not translator.done
    error = _payload({"error": {"message": "boom"}})
    assert ChunkTranslator().feed_plain([payloads[0], error, payloads[1]])[1] == 1
