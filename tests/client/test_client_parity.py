"""Sync and async see the same events; outcomes map to the right exceptions; handlers fire in order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from client_helpers import RUNNERS, async_client, sync_client

from fakes.replay_server import (
    ReplayServer,
    Transcript,
    error_transcript,
    failed_transcript,
    incomplete_transcript,
    text_transcript,
    tool_transcript,
)
from respstream.client import Client, ToolCallUpdate
from respstream.client.core import resolve_api_key, resolve_base_url
from respstream.errors import ResponseFailed, ResponseIncomplete, StreamError
from respstream.protocol.events import UnknownEvent

TRANSCRIPTS = {
    "platform-text": text_transcript("resp_p"),
    "openai-text": text_transcript("resp_o", dialect="openai"),
    "data-only": text_transcript("resp_d", dialect="data-only"),
    "tool": tool_transcript(),
    "rewrite": text_transcript("resp_rw", ["teh ", "answer"], rewrite_to="The answer"),
    "failed": failed_transcript(),
    "error": error_transcript(),
    "incomplete": incomplete_transcript(),
}


@pytest.mark.parametrize("name", list(TRANSCRIPTS))
def test_sync_and_async_see_identical_event_sequences(name: str) -> None:
    transcript = TRANSCRIPTS[name]
    with ReplayServer(transcript) as srv:
        sync_seen = RUNNERS["sync"](srv.base_url, input="hi")
        async_seen = RUNNERS["async"](srv.base_url, input="hi")
    assert sync_seen.events == async_seen.events
    assert [e.sequence_number for e in sync_seen.events] == [e["sequence_number"] for e in transcript.events]
    assert type(sync_seen.error) is type(async_seen.error)
    sync_json = (sync_seen.result or getattr(sync_seen.error, "response", None)).to_json()  # type: ignore[union-attr]
    async_json = (async_seen.result or getattr(async_seen.error, "response", None)).to_json()  # type: ignore[union-attr]
    assert sync_json == async_json


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("name", "cls", "status"),
    [("failed", ResponseFailed, "failed"), ("error", StreamError, "error"),
     ("incomplete", ResponseIncomplete, "incomplete")],
)
def test_outcomes_raise_from_result(mode: str, name: str, cls: type[Exception], status: str) -> None:
    with ReplayServer(TRANSCRIPTS[name]) as srv:
        seen = RUNNERS[mode](srv.base_url, input="hi")
    assert isinstance(seen.error, cls)
    assert seen.events  # iteration itself completed: the outcome is reported by result()
    assert seen.error.response is not None and seen.error.response.status == status
    assert seen.error.response.streamed_text == "Par"  # the one delta before the failure


def test_stream_error_carries_the_code() -> None:
    with ReplayServer(error_transcript(code="upstream_timeout")) as srv:
        seen = RUNNERS["sync"](srv.base_url, input="hi")
    assert isinstance(seen.error, StreamError)
    assert seen.error.error_code == "upstream_timeout"


def test_unknown_events_pass_through() -> None:
    events = [dict(e) for e in text_transcript("resp_u").events]
    events.insert(2, {"type": "keepalive", "sequence_number": 2})
    events.insert(3, {"type": "response.future_thing", "sequence_number": 3, "x": 1})
    for n, event in enumerate(events):
        event["sequence_number"] = n
    with ReplayServer(Transcript("resp_u", events)) as srv:
        seen = RUNNERS["sync"](srv.base_url, input="hi")
    unknown = [e for e in seen.events if isinstance(e, UnknownEvent)]
    assert [e.type for e in unknown] == ["keepalive", "response.future_thing"]
    assert seen.result is not None and seen.result.output_text == "Hello, world."


def _register(stream: Any, log: list[Any]) -> None:
    stream.on("*", lambda e: log.append(("any", e.sequence_number)))
    stream.on("response.output_text.delta", lambda e: log.append(("delta", e.delta)))
    stream.on_text(lambda d: log.append(("text", d)))
    stream.on_routing(lambda e: log.append(("routing", e.model_id, e.category)))
    stream.on_rewrite(lambda e: log.append(("rewrite",)))
    stream.on_tool_call(lambda u: log.append(("tool", u.phase, u.name, u.arguments, u.status, u.output)))
    stream.on_completed(lambda r: log.append(("completed", r.output_text)))
    stream.on_failed(lambda err: log.append(("failed", type(err).__name__)))


def test_handlers_fire_in_sequence_order_sync() -> None:
    with ReplayServer(text_transcript("resp_h", ["a", "b"], rewrite_to="AB")) as srv:
        client = sync_client(srv.base_url)
        log: list[Any] = []
        with client, client._http, client.stream(input="hi") as stream:
            _register(stream, log)
            result = stream.until_done().result()
    assert result.output_text == "AB" and result.streamed_text == "ab"
    named = [entry for entry in log if entry[0] != "any"]
    assert named == [("routing", "gpt-oss-120b", "fast"), ("delta", "a"), ("text", "a"), ("delta", "b"),
                     ("text", "b"), ("rewrite",), ("completed", "AB")]
    assert [entry[1] for entry in log if entry[0] == "any"] == list(range(12))  # every event, once, in order


def test_async_handlers_may_be_coroutines_and_fire_in_the_same_order() -> None:
    async def main() -> list[Any]:
        log: list[Any] = []

        async def on_text(delta: str) -> None:
            await asyncio.sleep(0)
            log.append(("async-text", delta))

        client = async_client(srv.base_url)
        async with client, client._http, client.stream(input="hi") as stream:
            _register(stream, log)
            stream.on_text(on_text)
            await stream.until_done()
            await stream.result()
        return log

    with ReplayServer(text_transcript("resp_h", ["a", "b"], rewrite_to="AB")) as srv:
        log = asyncio.run(main())
    named = [entry for entry in log if entry[0] != "any"]
    assert named == [("routing", "gpt-oss-120b", "fast"), ("delta", "a"), ("text", "a"), ("async-text", "a"),
                     ("delta", "b"), ("text", "b"), ("async-text", "b"), ("rewrite",), ("completed", "AB")]


def test_tool_call_hook_reports_start_arguments_done() -> None:
    updates: list[ToolCallUpdate] = []
    with ReplayServer(tool_transcript()) as srv:
        client = sync_client(srv.base_url)
        with client, client._http, client.stream(input="6*7?") as stream:
            stream.on_tool_call(updates.append)
            stream.until_done()
    assert [u.phase for u in updates] == ["start", "arguments", "arguments", "done"]
    assert [u.arguments for u in updates] == ["", '{"expres', '{"expression":"6*7"}', '{"expression":"6*7"}']
    assert (updates[-1].name, updates[-1].call_id, updates[-1].status, updates[-1].output) == (
        "calculator", "call_1", "completed", "42")


def test_failed_hook_gets_the_outcome_error() -> None:
    failures: list[Exception] = []
    with ReplayServer(failed_transcript()) as srv:
        client = sync_client(srv.base_url)
        with client, client._http, client.stream(input="hi") as stream:
            stream.on_failed(failures.append)
            with pytest.raises(ResponseFailed) as info:
                stream.result()
    assert failures == [info.value]
    assert "server_error" in str(info.value)


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RESPSTREAM_BASE_URL", "OPENAI_BASE_URL", "RESPSTREAM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_base_url(None) == "https://api.openai.com/v1"
    assert resolve_api_key(None) is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai.example/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert resolve_base_url(None) == "http://openai.example/v1"
    assert resolve_api_key(None) == "sk-openai"
    monkeypatch.setenv("RESPSTREAM_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("RESPSTREAM_API_KEY", "sk-rs")
    with Client() as client:
        assert client.config.base_url == "http://127.0.0.1:8080/v1"
        assert client.config.request_headers(stream=True)["authorization"] == "Bearer sk-rs"


def test_stream_rejects_stream_false() -> None:
    with Client("http://127.0.0.1:9/v1") as client, pytest.raises(ValueError, match="create"):
        client.stream(input="hi", stream=False)
