"""WebSocket mode and /responses/compact driven by real clients: the official openai SDK (responses.connect,
responses.compact) and our own Client.connect() / AsyncClient.connect(), against a live gateway on loopback.
The upstream is the SIMULATED scripted one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import OpenAI

from respstream.client import AsyncClient, BadRequestError, Client
from respstream.errors import ResponseFailed
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app
from .sdk_client import sdk

__all__ = ["sdk"]  # the OpenAI SDK client fixture (sdk_client.py) on this module's srv


@pytest.fixture(scope="module", params=["openai", "openresponses"])
def srv(request: pytest.FixtureRequest) -> Iterator[ServerThread]:
    upstreams = {
        "scripted-a": ScriptedUpstream(8, name="a", models=["scripted-a"]),
        "broken": ScriptedUpstream(5, name="broken", models=["broken"], fail_at=2),
    }
    with ServerThread(make_app(dialect=request.param, upstreams=upstreams), ws="websockets-sansio") as server:
        yield server


def _sdk_turn(conn: Any, **body: Any) -> tuple[list[Any], Any]:
    conn.response.create(**body)
    events = []
    for event in conn:
        events.append(event)
        if event.type in ("response.completed", "response.failed", "response.incomplete"):
            return events, event.response
        if event.type == "error" and getattr(event, "status", None) is not None:
            return events, event
    raise AssertionError("the connection ended before a terminal event")


def test_sdk_connect_sequential_responses_and_continuation(sdk: OpenAI) -> None:
    with sdk.responses.connect() as conn:
        events, first = _sdk_turn(conn, model="scripted-a", store=False, input="remember cobalt")
        assert first.status == "completed" and first.output_text == "The quick brown fox jumps over the lazy"
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert deltas == first.output_text
        _, second = _sdk_turn(conn, model="scripted-a", store=False, previous_response_id=first.id, input="word?")
        assert second.status == "completed" and second.previous_response_id == first.id
        _, missing = _sdk_turn(conn, model="scripted-a", store=False, previous_response_id="resp_nope", input="x")
        assert missing.type == "error" and missing.error.code == "previous_response_not_found"
    with sdk.responses.connect() as conn:  # a new socket: the store:false chain is gone
        _, gone = _sdk_turn(conn, model="scripted-a", store=False, previous_response_id=first.id, input="x")
        assert gone.error.code == "previous_response_not_found"


def test_sdk_compact_then_new_chain_over_websocket(sdk: OpenAI) -> None:
    compacted = sdk.responses.compact(model="auto", input=[
        {"type": "message", "role": "user", "content": "The code word is slate."},
        {"type": "message", "role": "assistant", "content": "OK."},
    ])
    assert compacted.object == "response.compaction"
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    assert compacted.usage.output_tokens > 0
    items = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    with sdk.responses.connect() as conn:
        _, answer = _sdk_turn(conn, model="scripted-a", store=False,
                              input=[*items, {"type": "message", "role": "user", "content": "Continue."}])
    assert answer.status == "completed"
    over_http = sdk.responses.create(model="scripted-a", input=[*items, {"role": "user", "content": "And now?"}])
    assert over_http.status == "completed"


def test_sdk_compact_needs_a_model(sdk: OpenAI, srv: ServerThread) -> None:
    import httpx

    missing = httpx.post(f"{srv.base_url}/responses/compact", json={"input": "x"})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "model"
    with pytest.raises(openai.BadRequestError) as info:
        sdk.responses.compact(model="auto", input="x", extra_body={"temperature": 1})
    assert info.value.body["param"] == "temperature"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as missing_prev:
        sdk.responses.compact(model="auto", previous_response_id="resp_unknown")
    assert missing_prev.value.code == "previous_response_not_found"


def test_compact_of_a_previous_response_chain(sdk: OpenAI) -> None:
    first = sdk.responses.create(model="scripted-a", input="The launch is on Tuesday.")
    compacted = sdk.responses.compact(model="auto", previous_response_id=first.id)
    assert compacted.output[-1].type == "compaction"
    assert [i.content[0].text for i in compacted.output if i.type == "message"] == ["The launch is on Tuesday."]


def test_our_client_connect(srv: ServerThread) -> None:
    with Client(srv.base_url, "x") as client, client.connect() as conn:
        first = conn.create(model="scripted-a", store=False, input="hi")
        assert first.status == "completed" and first.output_text == "The quick brown fox jumps over the lazy"
        events = list(conn.stream(model="scripted-a", store=False, previous_response_id=first.response_id,
                                  input="more"))
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        assert conn.last.core.violations == []
        with pytest.raises(BadRequestError) as info:
            conn.create(model="scripted-a", store=False, previous_response_id="resp_gone", input="x")
        assert info.value.error_code == "previous_response_not_found" and info.value.status_code == 400
        with pytest.raises(ResponseFailed):
            conn.create(model="broken", input="x")
        assert conn.create(model="scripted-a", input="still open").status == "completed"


async def test_our_async_client_connect(srv: ServerThread) -> None:
    async with AsyncClient(srv.base_url, "x") as client, client.connect() as conn:
        first = await conn.create(model="scripted-a", store=False, input="hi")
        second = await conn.create(model="scripted-a", store=False, previous_response_id=first.response_id,
                                   input="again")
        assert second.status == "completed"
        types = [event.type async for event in conn.stream(model="scripted-a", input="x")]
        assert types[0] == "response.created" and types[-1] == "response.completed"
