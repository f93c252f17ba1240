"""The gateway in front of a real HTTP Chat Completions upstream: the SIMULATED FakeChatCompletionsServer
(tests/fakes/chat_server.py, scripted per test) on loopback, reached through the real adapter and the real router,
streamed to a real HTTP client. Every stream is checked by StreamCore with zero violations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.chat_server import (
    Done,
    Drop,
    FakeChatCompletionsServer,
    Stall,
    Status,
    finish,
    reasoning,
    refusal,
    text,
    tool,
    usage,
)
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .helpers import Decoded, ServerThread, post_stream

# Short timeouts so a stall fails fast; no retries so one scripted 5xx is one failed attempt.
OPTIONS = {"idle_timeout": 1.0, "connect_timeout": 1.0, "retries": 0}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer() as server:
        yield server


@pytest.fixture(scope="module")
def fake_b() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer() as server:
        yield server


@pytest.fixture(params=["platform", "openai", "openresponses"])
def dialect(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _gateway(dialect: str, *upstream_urls: str) -> ServerThread:
    config = Config(dialect=dialect, upstreams=list(upstream_urls), upstream_options=dict(OPTIONS))
    return ServerThread(create_app(config))


@pytest.fixture
def one(fake: FakeChatCompletionsServer, dialect: str) -> Iterator[tuple[str, FakeChatCompletionsServer, str]]:
    fake.reset()
    with _gateway(dialect, fake.url) as gw:  # a fresh gateway: no breaker state carried between tests
        yield gw.url, fake, dialect


def _stream(url: str, dialect: str, **body: Any) -> Decoded:
    d = post_stream(url, {"input": "Say hi.", **body}, dialect=dialect)
    assert d.status_code == 200
    assert d.violations == [], d.violations
    return d


def test_text_and_usage(one: tuple[str, FakeChatCompletionsServer, str]) -> None:
    url, fake, dialect = one
    fake.script(text("Hel"), text("lo, "), text("world"), finish("stop"), usage(7, 3), Done())
    d = _stream(url, dialect)
    r = d.core.result
    assert r.status == "completed" and r.output_text == "Hello, world" == r.streamed_text
    assert r.usage is not None and r.usage["input_tokens"] == 7 and r.usage["output_tokens"] == 3
    assert fake.requests[-1]["stream"] is True and fake.requests[-1]["messages"][-1]["content"] == "Say hi."


def test_reasoning_and_think_tags_never_reach_the_answer(one: tuple[str, FakeChatCompletionsServer, str]) -> None:
    url, fake, dialect = one
    fake.script(reasoning("Weighing "), reasoning("options."), text("<thi"), text("nk>hidden pl"), text("an</th"),
                text("ink>The answer"), text(" is 4."), finish("stop"), Done())
    d = _stream(url, dialect)
    r = d.core.result
    assert r.status == "completed" and r.output_text == "The answer is 4."
    assert "hidden" not in r.streamed_text and "think" not in r.streamed_text
    # OpenAI's name for raw reasoning deltas; Open Responses names them response.reasoning.delta.
    name = "response.reasoning.delta" if dialect == "openresponses" else "response.reasoning_text.delta"
    thoughts = "".join(p["delta"] for p in d.payloads() if p["type"] == name)
    assert "Weighing options." in thoughts and "hidden plan" in thoughts
    reasoning_items = [p["item"] for p in d.payloads() if p["type"] == "response.output_item.done"
                       and p["item"]["type"] == "reasoning"]
    assert reasoning_items and all(i["status"] == "completed" for i in reasoning_items)
    assert [i["type"] for i in r.output][-1] == "message"


def test_tool_call_deltas_split_awkwardly_become_a_client_function_call(
    one: tuple[str, FakeChatCompletionsServer, str],
) -> None:
    url, fake, dialect = one
    fake.script(tool(0, id="call_w1", name="get_weather", args=""), tool(0, args='{"ci'), tool(0, args='ty": "Pa'),
                tool(0, args='ris", "unit'), tool(0, args='": "C"}'), finish("tool_calls"), Done())
    weather = {"type": "function", "name": "get_weather", "description": "weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    d = _stream(url, dialect, tools=[weather])
    r = d.core.result
    assert r.status == "completed"
    assert [(c["call_id"], c["name"], c["arguments"]) for c in r.tool_calls] == [
        ("call_w1", "get_weather", '{"city": "Paris", "unit": "C"}')]
    assert r.output[-1]["type"] == "function_call" and r.output[-1]["status"] == "completed"
    sent_tools = fake.requests[-1]["tools"]
    assert "get_weather" in [t["function"]["name"] for t in sent_tools]


def test_refusal_becomes_a_refusal_part(one: tuple[str, FakeChatCompletionsServer, str]) -> None:
    url, fake, dialect = one
    fake.script(refusal("I can"), refusal("not help with that."), finish("stop"), Done())
    d = _stream(url, dialect)
    r = d.core.result
    assert r.refusal == "I cannot help with that." and r.output_text == ""
    parts = [p["part"]["type"] for p in d.payloads() if p["type"] == "response.content_part.done"]
    assert parts == ["refusal"]


def test_finish_length_is_incomplete_in_each_dialect(one: tuple[str, FakeChatCompletionsServer, str]) -> None:
    url, fake, dialect = one
    fake.script(text("A long"), text(" answer that"), finish("length"), Done())
    d = _stream(url, dialect, max_output_tokens=3)
    r = d.core.result
    assert r.status == "incomplete" and r.incomplete_details == {"reason": "max_output_tokens"}
    last = d.payloads()[-1]
    if dialect == "platform":
        assert last["type"] == "response.completed" and last["response"]["status"] == "incomplete"
    else:
        assert last["type"] == "response.incomplete"
    assert fake.requests[-1]["max_tokens"] == 3


def test_5xx_before_first_token_falls_back_to_the_other_upstream(
    fake: FakeChatCompletionsServer, fake_b: FakeChatCompletionsServer, dialect: str
) -> None:
    fake.reset()
    fake_b.reset()
    fake.script(Status(503, {"error": {"message": "overloaded"}}))
    fake_b.script(text("from B"), finish("stop"), Done())
    with _gateway(dialect, fake.url, fake_b.url) as gw:
        d = _stream(gw.url, dialect)
    routing = [p for p in d.payloads() if p["type"].endswith("response.routing.completed")]
    assert d.core.result.status == "completed" and d.core.result.output_text == "from B"
    if dialect == "openresponses":  # no extension event by default (openresponses_routing_event); the model shows it
        assert routing == [] and d.payloads()[-1]["response"]["model"] == d.payloads()[0]["response"]["model"]
        assert len(fake.requests) == 1 and len(fake_b.requests) == 1
        return
    assert [p["source"] for p in routing] == ["router", "fallback"]
    assert f"127.0.0.1:{fake.port} failed" in routing[1]["reasoning"] and str(fake_b.port) in routing[1]["reasoning"]
    assert len(fake.requests) == 1 and len(fake_b.requests) == 1


def test_drop_mid_stream_is_upstream_error(one: tuple[str, FakeChatCompletionsServer, str]) -> None:
    url, fake, dialect = one
    fake.script(text("partial "), text("answ"), Drop())
    d = _stream(url, dialect)
    r = d.core.result
    assert r.status in ("error", "failed") and r.error is not None and r.error["code"] == "upstream_error"
    assert r.streamed_text == "partial answ"
    assert len(fake.requests) == 1  # output was shown: no retry, no fallback


def test_stall_is_upstream_timeout(one: tuple[str, FakeChatCompletionsServer, str]) -> None:
    url, fake, dialect = one
    fake.script(text("thinking"), Stall())
    started = time.monotonic()
    d = _stream(url, dialect)
    elapsed = time.monotonic() - started
    r = d.core.result
    assert r.error is not None and r.error["code"] == "upstream_timeout"
    assert OPTIONS["idle_timeout"] <= elapsed < 10
    assert fake.wait_finished(1) and fake.client_disconnects == 1  # the stalled upstream connection was closed
