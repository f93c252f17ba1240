"""The adapter's fast paths give the same results as the general ones (SIMULATED upstream over real loopback HTTP)."""

from __future__ import annotations

import gzip
import json
import time
from typing import Any

import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, Headers, Raw, Sleep, Step, finish, text
from respstream.server.upstream.base import Chunk, Finish, GenerationRequest, ReasoningDelta, TextDelta, UpstreamError
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.chat_wire import simple_data_events

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}])


def make(fake: FakeChatCompletionsServer, **options: Any) -> ChatCompletionsUpstream:
    defaults: dict[str, Any] = {"name": "fake", "idle_timeout": 5.0, "retry_backoff": 0.01, "models": ["fake-model"]}
    defaults.update(options)
    return ChatCompletionsUpstream(fake.url, **defaults)


async def collect(upstream: ChatCompletionsUpstream) -> list[Chunk]:
    try:
        return [chunk async for chunk in upstream.generate(REQUEST)]
    finally:
        await upstream.aclose()


def event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def content(value: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": value}, "finish_reason": None}]}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'data: {"a":1}\n\n', [b'{"a":1}']),
        (b"data: A\n\ndata: B\n\n", [b"A", b"B"]),
        (b"data: [DONE]\n\n", [b"[DONE]"]),
        (b"data:  two spaces\n\n", [b" two spaces"]),  # SSE strips exactly one space
        (b"data: A\r\n\r\n", None),  # CR framing: the full decoder
        (b"data: A\ndata: B\n\n", None),  # a two-line data field
        (b"event: error\ndata: {}\n\n", None),
        (b": keep-alive\n\n", None),
        (b"data: partial", None),
        (b"data: A\n\n\n", None),
        (b"data: A\n\ndata: B", None),
        (b"data:A\n\n", None),  # no space: legal SSE, left to the decoder
    ],
)
def test_simple_data_events(raw: bytes, expected: list[bytes] | None) -> None:
    assert simple_data_events(raw) == expected


async def test_events_split_across_reads_then_whole_ones(fake: FakeChatCompletionsServer) -> None:
    whole = event(content("Hel"))
    fake.script(
        Raw(whole[:10]),
        Sleep(0.02),  # separate reads: the first ends mid-event, so the decoder must hold it
        Raw(whole[10:] + event(content("lo"))[:7]),
        Sleep(0.02),
        Raw(event(content("lo"))[7:]),
        Sleep(0.02),
        Raw(event(content(" world")) + b": comment\n\n" + event(content("!"))),
        text(" <think>hm</think>ok"),
        finish(),
        Done(),
    )
    chunks = await collect(make(fake))
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Hello world! ok"
    assert ReasoningDelta("hm") in chunks and chunks[-1] == Finish("stop", None)


async def test_gzip_stream_is_decoded(fake: FakeChatCompletionsServer) -> None:
    body = event(content("packed")) + event({"choices": [{"delta": {}, "finish_reason": "stop"}]}) + b"data: [DONE]\n\n"
    fake.script(Headers({"content-encoding": "gzip"}), Raw(gzip.compress(body)))
    chunks = await collect(make(fake))
    assert chunks == [TextDelta("packed"), Finish("stop", None)]
    assert fake.request_headers[-1]["accept-encoding"] == "identity"  # we never ask for compression


async def test_odd_typed_fields_are_ignored_not_fatal(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        Raw(event(content(123))),  # a number where text belongs
        Raw(event({"choices": [{"delta": {"content": "ok", "reasoning": {"effort": "low"}, "tool_calls": "x"}}]})),
        Raw(event({"choices": [{"delta": None, "finish_reason": 7}], "usage": "n/a"})),
        finish(),
        Done(),
    )
    chunks = await collect(make(fake))
    assert chunks == [TextDelta("ok"), Finish("stop", None)]


def test_translator_typed_and_lenient_paths_agree() -> None:
    payloads = [
        json.dumps(content("a")).encode(),
        json.dumps({"choices": [{"delta": {"reasoning_content": "r", "content": "<thi"}}]}).encode(),
        json.dumps({"choices": [{"delta": {"content": "nk>x</think>b"}}], "id": 5}).encode(),  # id: wrong type
        json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode(),
        json.dumps({"choices": [{"delta": {}, "finish_reason": "length"}]}).encode(),
    ]
    translator = ChunkTranslator()
    got = [c for p in payloads for c in translator.feed(p)] + translator.finish()
    assert "".join(c.text for c in got if isinstance(c, TextDelta)) == "ab"
    assert [c.text for c in got if isinstance(c, ReasoningDelta)] == ["r", "x"]
    last = got[-1]
    assert isinstance(last, Finish) and last.reason == "length" and last.usage is not None
    assert (last.usage.input_tokens, last.usage.output_tokens) == (3, 2)


async def test_deadline_is_exact_when_it_is_closer_than_the_idle_timeout(fake: FakeChatCompletionsServer) -> None:
    steps: list[Step] = []
    for i in range(100):
        steps += [text(f"w{i} "), Sleep(0.02)]
    fake.script(*steps, finish(), Done())
    started = time.monotonic()
    upstream = make(fake, deadline=0.5, idle_timeout=0.2, retries=0)
    with pytest.raises(UpstreamError) as info:
        await collect(upstream)
    elapsed = time.monotonic() - started
    assert info.value.code == "upstream_timeout" and "deadline" in info.value.message
    # Not early; the upper bound only has to tell the deadline from the stream's own end (2 s of paced deltas: it
    # would have ended without an error) and from the idle timeout, so a busy machine's scheduling delays fit in it.
    assert 0.45 <= elapsed < 10


async def test_start_warms_the_pool_and_generations_reuse_the_connection(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("one"), finish(), Done())
    fake.script(text("two"), finish(), Done())
    upstream = ChatCompletionsUpstream(fake.url, name="fake")  # models discovered at start()
    try:
        await upstream.start()
        assert upstream.models == ["fake-model"]
        first = [c async for c in upstream.generate(REQUEST)]
        await upstream.settle()  # the body's end may still be on its way on a loaded machine
        second = [c async for c in upstream.generate(REQUEST)]
    finally:
        await upstream.aclose()
    assert first[0] == TextDelta("one") and second[0] == TextDelta("two")
    assert len(fake.clients) == 3 and len(set(fake.clients)) == 1  # GET /models, then both POSTs: one connection
