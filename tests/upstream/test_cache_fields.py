"""The client's prompt-cache fields reach OpenAI-shaped upstreams: ``prompt_cache_key``, ``prompt_cache_options`` and
``prompt_cache_retention`` as given, breakpoints as ``prompt_cache_breakpoint`` on the marked message's last part
(chat_wire.py, responses/adapter.py), in the names and shapes the official ``openai`` SDK's request types declare; the
embedded model gets none of them. End to end through the gateway to the SIMULATED Chat Completions server and the
SIMULATED native Responses upstream (tests/fakes)."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletionContentPartTextParam
from openai.types.chat.completion_create_params import CompletionCreateParamsBase
from openai.types.chat.completion_create_params import PromptCacheOptions as ChatCacheOptions
from openai.types.responses import ResponseInputTextParam
from openai.types.responses.response_create_params import PromptCacheOptions, ResponseCreateParamsBase

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text
from fakes.responses_upstream import FakeResponsesUpstream
from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.cache_hints import CACHE_BREAKPOINT_KEY, CacheHints
from respstream.server.upstream.chat_wire import build_request_body
from respstream.server.upstream.responses.adapter import build_responses_body

MARK = {"mode": "explicit", "ttl": "12h"}
WIRE = {"prompt_cache_options": {"ttl": "30m", "mode": "explicit"}}


def request() -> GenerationRequest:
    return GenerationRequest(
        model="m", messages=[{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "A long document.", CACHE_BREAKPOINT_KEY: MARK},
                             {"role": "assistant", "content": "Read."}, {"role": "user", "content": "Sum up."}],
        options={"prompt_cache_key": "k-1"}, cache=CacheHints(asked=True, mode="explicit", ttl_seconds=1800,
                                                                wire=dict(WIRE)))


def _declared(typed: Any) -> set[str]:
    return set(typing.get_type_hints(typed))


def test_chat_body_takes_the_fields_the_sdk_declares() -> None:
    body = build_request_body(request())
    assert body["prompt_cache_key"] == "k-1" and body["prompt_cache_options"] == WIRE["prompt_cache_options"]
    assert {"prompt_cache_key", "prompt_cache_options", "prompt_cache_retention"} <= _declared(
        CompletionCreateParamsBase)
    assert set(body["prompt_cache_options"]) <= _declared(ChatCacheOptions)
    part = body["messages"][1]["content"]
    assert part == [{"type": "text", "text": "A long document.", "prompt_cache_breakpoint": MARK}]
    assert set(part[0]) <= _declared(ChatCompletionContentPartTextParam)
    assert [m["content"] for m in body["messages"][2:]] == ["Read.", "Sum up."]  # unmarked: unchanged
    assert all(CACHE_BREAKPOINT_KEY not in m for m in body["messages"])  # (the gateway's own key stays home)
    plain = build_request_body(request(), cache_fields=False)  # the embedded model's body
    assert "prompt_cache_options" not in plain and plain["messages"][1] == {"role": "user",
                                                                           "content": "A long document."}


def test_native_body_takes_the_fields_the_sdk_declares() -> None:
    body = build_responses_body(request())
    assert body["prompt_cache_key"] == "k-1" and body["prompt_cache_options"] == WIRE["prompt_cache_options"]
    assert {"prompt_cache_key", "prompt_cache_options", "prompt_cache_retention"} <= _declared(
        ResponseCreateParamsBase)
    assert set(body["prompt_cache_options"]) <= _declared(PromptCacheOptions)
    marked = body["input"][1]["content"]
    assert marked == [{"type": "input_text", "text": "A long document.", "prompt_cache_breakpoint": MARK}]
    assert set(marked[0]) <= _declared(ResponseInputTextParam)
    assert body["input"][2]["content"] == "Read."
    assert all(CACHE_BREAKPOINT_KEY not in item for item in body["input"])
    plain = build_responses_body(request(), cache_fields=False)
    assert "prompt_cache_key" not in plain and plain["input"][1]["content"] == "A long document."


@pytest.fixture(scope="module")
def gateways() -> Iterator[dict[str, Any]]:
    with FakeChatCompletionsServer(models=["fake-model"]) as chat, FakeResponsesUpstream() as native:
        chat_config = Config(dialect="openai", upstreams=[chat.url], upstream_options={"retries": 0})
        native_config = Config(dialect="openai", upstreams=[f"responses+{native.base_url}"],
                               upstream_options={"retries": 0})
        with ServerThread(create_app(chat_config)) as g_chat, ServerThread(create_app(native_config)) as g_native:
            yield {"chat": (g_chat, chat, "fake-model"), "native": (g_native, native, "text")}


def _received(gateways: dict[str, Any], kind: str, body: dict[str, Any]) -> dict[str, Any]:
    gateway, fake, model = gateways[kind]
    if kind == "chat":
        fake.reset()
        fake.script(text("Hello."), finish(), Done())
    answer = httpx.post(f"{gateway.base_url}/responses", json={"model": model, "stream": False, **body}, timeout=30)
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    return dict(fake.requests[-1])


@pytest.mark.parametrize("kind", ["chat", "native"])
def test_through_the_gateway(gateways: dict[str, Any], kind: str) -> None:
    marked = {"type": "input_text", "text": "A long document.", "prompt_cache_breakpoint": {"mode": "explicit"}}
    body = {"instructions": "Be brief.", "prompt_cache_key": "k-9", "prompt_cache_options": {"mode": "explicit"},
            "input": [{"role": "user", "content": [marked]}]}
    got = _received(gateways, kind, body)
    assert got["prompt_cache_key"] == "k-9" and got["prompt_cache_options"] == {"mode": "explicit"}
    assert "prompt_cache_retention" not in got
    messages = got["messages"] if kind == "chat" else got["input"]
    last = messages[-1]["content"]
    assert isinstance(last, list) and last[-1]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert last[-1]["text"] == "A long document."
    got = _received(gateways, kind, {"input": "Hi.", "prompt_cache_retention": "24h"})
    assert got["prompt_cache_retention"] == "24h" and "prompt_cache_options" not in got
    got = _received(gateways, kind, {"input": "Hi.", "prompt_cache_options": {"ttl": "12h"}})
    assert got["prompt_cache_options"] == {"ttl": "12h", "mode": "implicit"}
    got = _received(gateways, kind, {"input": "Hi."})
    assert not {"prompt_cache_options", "prompt_cache_retention", "prompt_cache_key"} & set(got)
