"""``usage.input_tokens_details.cached_tokens`` is what the upstream reused, for every upstream kind.

Upstreams here are SIMULATED (tests/fakes/chat_server.py for Chat Completions, tests/fakes/responses_upstream.py for
a native Responses API) and reached through the real gateway over loopback; the last test uses the real embedded
model (SmolLM2 through llama.cpp), whose second read of the same long prompt must come from its KV cache.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.chat_server import Chunk, Done, FakeChatCompletionsServer, finish, text, usage
from fakes.responses_upstream import FakeResponsesUpstream
from fakes.server_thread import ServerThread
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.base import Finish, GenerationRequest
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream


def _final_usage(raw: bytes) -> dict[str, Any]:
    core = StreamCore(dialect="openai")
    core.feed(raw)
    core.close()
    assert core.violations == [], core.violations
    assert core.result.usage is not None
    return core.result.usage


def _post(gateway: ServerThread, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{gateway.base_url}/responses", json={"stream": True, **body}, timeout=60)
    assert response.status_code == 200, response.text
    return _final_usage(response.content)


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer() as server:
        yield server


def _chat_gateway(url: str) -> ServerThread:
    return ServerThread(create_app(Config(dialect="openai", upstreams=[f"chat+{url}"], rewrite={"steps": []},
                                          upstream_options={"retries": 0})))


def test_chat_completions_prompt_tokens_details_cached_tokens(chat: FakeChatCompletionsServer) -> None:
    chat.reset()
    chat.script(text("hi"), finish("stop"), usage(4000, 2, cached=3584), Done())
    with _chat_gateway(chat.url) as gateway:
        got = _post(gateway, {"input": "Say hi."})
    assert got["input_tokens"] == 4000 and got["input_tokens_details"] == {"cached_tokens": 3584}


def test_llamacpp_timings_cache_n_when_usage_has_no_details(chat: FakeChatCompletionsServer) -> None:
    # An older llama.cpp build: usage without prompt_tokens_details; what it reused is timings.cache_n.
    chat.reset()
    final = {"id": "c", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 1722, "completion_tokens": 2, "total_tokens": 1724},
             "timings": {"cache_n": 1714, "prompt_n": 8, "prompt_ms": 150.5}}
    chat.script(text("hi"), finish("stop"), Chunk(final), Done())
    with _chat_gateway(chat.url) as gateway:
        got = _post(gateway, {"input": "Say hi."})
    assert got["input_tokens"] == 1722 and got["input_tokens_details"] == {"cached_tokens": 1714}


def test_no_cache_reported_is_zero_not_invented(chat: FakeChatCompletionsServer) -> None:
    chat.reset()
    chat.script(text("hi"), finish("stop"), usage(50, 2), Done())
    with _chat_gateway(chat.url) as gateway:
        got = _post(gateway, {"input": "Say hi."})
    assert got["input_tokens_details"] == {"cached_tokens": 0}


def _native_transcript(cached: int) -> bytes:
    """A SIMULATED native Responses stream whose terminal usage reports ``cached`` cached input tokens."""
    rid, mid = "resp_cache1", "msg_cache1"
    base = {"id": rid, "object": "response", "created_at": 1, "status": "in_progress", "model": "cached_native",
            "output": []}
    item = {"id": mid, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": base},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "item_id": mid, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", "item_id": mid, "output_index": 0, "content_index": 0,
         "delta": "ok"},
        {"type": "response.output_text.done", "item_id": mid, "output_index": 0, "content_index": 0, "text": "ok"},
        {"type": "response.content_part.done", "item_id": mid, "output_index": 0, "content_index": 0,
         "part": item["content"][0]},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {
            **base, "status": "completed", "output": [item],
            "usage": {"input_tokens": 9000, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": 1,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 9001}}},
    ]
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events))


def test_native_responses_input_tokens_details_cached_tokens() -> None:
    with FakeResponsesUpstream(chunk=64) as native:
        native.add("cached_native", _native_transcript(8192))
        config = Config(dialect="openai", upstreams=[f"responses+{native.base_url}"], rewrite={"steps": []})
        with ServerThread(create_app(config)) as gateway:
            got = _post(gateway, {"model": "cached_native", "input": "hi"})
    assert got["input_tokens"] == 9000 and got["input_tokens_details"] == {"cached_tokens": 8192}


# -- the real embedded model ----------------------------------------------------------------------------------------

LONG_PROMPT = "You are a careful assistant. " + " ".join(
    f"Rule {i}: check item {i} twice before you answer." for i in range(110))


@pytest.mark.model
def test_embedded_second_read_of_a_long_prompt_is_cached() -> None:
    if not EmbeddedUpstream.available("small"):
        pytest.skip("embedded model not installed (run `make install-model`)")
    upstream = EmbeddedUpstream(model_size="small", n_parallel=1, n_ctx=4096)
    app = create_app(Config(dialect="openai", upstreams=["embedded"], rewrite={"steps": []}),
                     Components(upstreams=[upstream]))
    with ServerThread(app, start_timeout=120) as gateway:
        body = {"instructions": LONG_PROMPT, "max_output_tokens": 2, "temperature": 0}
        first = _post(gateway, {**body, "input": "Name a colour."})
        second = _post(gateway, {**body, "input": "Name a fruit."})
    assert first["input_tokens"] > 1000
    assert first["input_tokens_details"]["cached_tokens"] < 64  # a fresh process: nothing to reuse yet
    # The instructions and all but the last message's few tokens came from llama.cpp's KV cache.
    assert second["input_tokens_details"]["cached_tokens"] > first["input_tokens"] - 64


@pytest.mark.model
async def test_embedded_upstream_reports_llamacpp_reuse_in_finish_usage() -> None:
    if not EmbeddedUpstream.available("small"):
        pytest.skip("embedded model not installed (run `make install-model`)")
    upstream = EmbeddedUpstream(model_size="small", n_parallel=1, n_ctx=4096)
    try:
        usages = []
        for question in ("Name a colour.", "Name a fruit."):
            request = GenerationRequest(model=upstream.models[0], max_output_tokens=2, temperature=0.0,
                                        messages=[{"role": "system", "content": LONG_PROMPT},
                                                  {"role": "user", "content": question}])
            chunks = [c async for c in upstream.generate(request)]
            finish_chunk = chunks[-1]
            assert isinstance(finish_chunk, Finish) and finish_chunk.usage is not None
            usages.append(finish_chunk.usage)
        assert usages[0].cached_tokens < 64 < usages[1].cached_tokens <= usages[1].input_tokens
    finally:
        await upstream.aclose()
