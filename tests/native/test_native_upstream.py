"""The native Responses upstream's parts: the request it sends, the API probe, per-upstream options, failover from a
lone ``response.failed``, a cut stream, repairs in GET and /metrics, conversation history expanded into input items.
Upstreams are SIMULATED (tests/fakes/responses_upstream.py, tests/fakes/chat_server.py) on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from fakes.chat_server import FakeChatCompletionsServer, finish, text
from fakes.responses_upstream import FakeResponsesUpstream
from fakes.server_thread import ServerThread
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.base import Finish, GenerationRequest, TextDelta, ToolCallDelta, UpstreamError
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.factory import build_upstream
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream, build_responses_body
from respstream.server.upstream.responses.stream import ResponsesTranslator

from .test_replay_through_gateway import TRANSCRIPTS


@pytest.fixture(scope="module")
def native() -> Iterator[FakeResponsesUpstream]:
    with FakeResponsesUpstream(chunk=7) as fake:
        yield fake


def collect(upstream: ResponsesNativeUpstream, request: GenerationRequest) -> list[object]:
    async def go() -> list[object]:
        try:
            await upstream.start()
            return [c async for c in upstream.generate(request)]
        finally:
            await upstream.aclose()

    return asyncio.run(go())


def test_request_body_maps_messages_tools_and_limits() -> None:
    request = GenerationRequest(
        model="m",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        tools=[{"type": "function", "function": {"name": "w", "description": "d", "parameters": {"type": "object"}}}],
        tool_choice={"type": "function", "function": {"name": "w"}},
        max_output_tokens=5,
        temperature=0.0,
    )
    body = build_responses_body(request, model="upstream-id")
    assert body["model"] == "upstream-id" and body["stream"] is True and body["store"] is False
    assert body["input"] == [
        {"type": "message", "role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    assert body["tools"] == [{"type": "function", "name": "w", "description": "d", "parameters": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "function", "name": "w"}
    assert (body["max_output_tokens"], body["temperature"]) == (5, 0.0)


def test_translator_parallel_calls_and_usage() -> None:
    translator = ResponsesTranslator(name="t")
    data = (TRANSCRIPTS / "parallel_function_calls.sse").read_bytes()
    chunks = []
    for i in range(0, len(data), 3):
        chunks += translator.feed(data[i : i + 3])
    chunks += translator.finish()
    assert translator.failure is None
    calls = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(c.index, c.name) for c in calls] == [(0, "get_weather"), (1, "get_time")]
    last = chunks[-1]
    assert isinstance(last, Finish) and last.reason == "tool_calls" and last.repairs == {}


def test_translator_cut_stream_is_a_failure_after_the_text() -> None:
    translator = ResponsesTranslator(name="up")
    chunks = translator.feed((TRANSCRIPTS / "truncated_mid_text.sse").read_bytes())
    chunks += translator.finish()
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Hello,"
    assert isinstance(translator.failure, UpstreamError)
    assert translator.failure.code == "upstream_error" and not translator.failure.before_first_token
    assert "cut" in translator.failure.message and translator.failure.repairs == {"lifecycle.no_terminal": 1}


def test_translator_completed_with_status_incomplete_is_length() -> None:
    translator = ResponsesTranslator(name="up")
    chunks = translator.feed((TRANSCRIPTS / "completed_status_incomplete.sse").read_bytes()) + translator.finish()
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "length"


def test_probe_finds_each_api(native: FakeResponsesUpstream) -> None:
    async def mode(url: str) -> str:
        upstream = build_upstream(url, probe_timeout=2.0, connect_timeout=1.0)
        assert isinstance(upstream, ResponsesNativeUpstream)
        try:
            await upstream.start()
            return upstream.api_mode
        finally:
            await upstream.aclose()

    with FakeChatCompletionsServer() as chat:
        assert asyncio.run(mode(chat.url)) == "chat"  # 404 on /responses
    assert asyncio.run(mode(native.base_url)) == "responses"  # 400 on {}: a Responses API
    assert asyncio.run(mode("http://127.0.0.1:9/v1")) == "auto"  # no answer: undecided, Chat Completions for now
    assert isinstance(build_upstream(f"chat+{native.base_url}"), ChatCompletionsUpstream)
    explicit = build_upstream(f"responses+{native.base_url}")
    assert isinstance(explicit, ResponsesNativeUpstream) and explicit.api_mode == "responses"


def test_an_undecided_upstream_answers_through_chat_completions() -> None:
    with FakeChatCompletionsServer() as chat:
        chat.script(text("via chat"), finish())
        upstream = ResponsesNativeUpstream(chat.url, name="x", api="auto", retries=0)
        chunks = collect(upstream, GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}]))
    assert upstream.api_mode == "chat"
    assert chunks[0] == TextDelta("via chat")


def test_per_upstream_options_reach_that_upstream_only(native: FakeResponsesUpstream) -> None:
    spec = f"responses+{native.base_url}"
    options = {"api_key": "shared", "per_upstream": {spec: {"api_key": "own-key", "headers": {"x-tenant": "t1"}}}}
    own = build_upstream(spec, **options)
    other = build_upstream("chat+http://127.0.0.1:1/v1", **options)
    assert isinstance(own, ResponsesNativeUpstream) and isinstance(other, ChatCompletionsUpstream)
    assert own.api_key == "own-key" and other.api_key == "shared"
    before = len(native.headers)
    collect(own, GenerationRequest(model="text", messages=[{"role": "user", "content": "hi"}]))
    sent = native.headers[before]
    assert sent["authorization"] == "Bearer own-key" and sent["x-tenant"] == "t1"
    with pytest.raises(ValueError, match="per_upstream"):
        build_upstream(spec, per_upstream=["nope"])


def test_lone_failed_before_any_output_fails_over(native: FakeResponsesUpstream) -> None:
    with FakeChatCompletionsServer(models=["lone_failed"]) as chat:
        chat.script(text("rescued"), finish())
        config = Config(dialect="openai", upstreams=[f"responses+{native.base_url}", f"chat+{chat.url}"],
                        upstream_options={"retries": 0}, rewrite={"steps": []})
        with ServerThread(create_app(config)) as gateway:
            response = httpx.post(f"{gateway.base_url}/responses", timeout=30,
                                  json={"model": "lone_failed", "input": "hi", "stream": True})
    core = StreamCore(dialect="openai")
    core.feed(response.content)
    core.close()
    assert core.violations == []
    assert core.status == "completed" and core.result.output_text == "rescued"


def test_repairs_in_get_metrics_and_history_as_input_items(native: FakeResponsesUpstream) -> None:
    config = Config(dialect="platform", upstreams=[f"responses+{native.base_url}"], rewrite={"steps": []})
    with ServerThread(create_app(config)) as gateway, httpx.Client(timeout=30) as client:
        first = client.post(f"{gateway.base_url}/responses",
                            json={"model": "llamacpp_native_text", "input": "Hi there", "stream": False}).json()
        assert first["respstream:repairs"] == {"envelope.missing_field": 2, "sequence.missing": 1}
        assert client.get(f"{gateway.base_url}/responses/{first['id']}").json()["respstream:repairs"] == \
            first["respstream:repairs"]
        before = len(native.requests)
        client.post(f"{gateway.base_url}/responses", json={"model": "text", "input": "And again?", "stream": False,
                                                           "previous_response_id": first["id"]})
        sent = native.requests[before]
        metrics = client.get(f"{gateway.url}/metrics").text
    # The upstream stores nothing (store: false): the earlier turn comes along as input items.
    assert sent["store"] is False
    assert [(i.get("role"), i["content"]) for i in sent["input"] if i["type"] == "message"][-3:] == [
        ("user", "Hi there"), ("assistant", "Chatbot: Hello, welcome to my world."), ("user", "And again?")]
    assert 'respstream_upstream_repairs_total{code="sequence.missing"} 1' in metrics
