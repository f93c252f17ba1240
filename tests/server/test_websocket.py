"""WebSocket mode of /v1/responses over real loopback sockets (uvicorn + the `websockets` client).

The upstream is the SIMULATED scripted one; everything else (app, store, service, uvicorn, sockets) is real.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from respstream.cli import main
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app

# The log's own `error` event is followed by `response.failed` in these dialects; an `error` with a `status` is the
# WebSocket error envelope (no response was made) and ends the turn by itself.
TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


def ws_url(srv: ServerThread) -> str:
    return f"ws://127.0.0.1:{srv.port}/v1/responses"


def turn(ws: ClientConnection, **body: Any) -> list[dict[str, Any]]:
    """Send one response.create and read every message up to its terminal."""
    ws.send(json.dumps({"type": "response.create", **body}))
    return read_turn(ws)


def read_turn(ws: ClientConnection) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while True:
        raw = ws.recv(timeout=10)
        assert isinstance(raw, str), "every event is a text message"
        event = json.loads(raw)
        events.append(event)
        if event["type"] in TERMINALS or (event["type"] == "error" and "status" in event):
            return events


def final(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["type"] == "response.completed", events[-1]
    return dict(events[-1]["response"])


@pytest.fixture(scope="module", params=["openai", "openresponses"])
def srv(request: pytest.FixtureRequest) -> Iterator[ServerThread]:
    upstreams = {
        "scripted-a": ScriptedUpstream(8, name="a", models=["scripted-a"]),
        "slow": ScriptedUpstream(200, name="slow", models=["slow"], delay_ms=20),
        "broken": ScriptedUpstream(5, name="broken", models=["broken"], fail_at=2),
    }
    with ServerThread(make_app(dialect=request.param, upstreams=upstreams), ws="websockets-sansio") as server:
        yield server


def test_events_are_the_sse_events_one_message_each(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        events = turn(ws, model="scripted-a", input="hello")
    with httpx.stream("POST", f"{srv.url}/v1/responses", json={"model": "scripted-a", "input": "hello",
                                                                "stream": True}) as r:
        sse = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    assert [e["type"] for e in events] == [e["type"] for e in sse]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    text = final(events)["output"][0]["content"][0]["text"]
    assert "".join(deltas) == text == "The quick brown fox jumps over the lazy"


def test_many_sequential_responses_and_store_false_continuation(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        first = final(turn(ws, model="scripted-a", store=False, input="remember cobalt"))
        second = final(turn(ws, model="scripted-a", store=False, previous_response_id=first["id"], input="and?"))
        assert second["previous_response_id"] == first["id"] and second["status"] == "completed"
        for _ in range(3):
            assert final(turn(ws, model="scripted-a", input="again"))["status"] == "completed"
    # store:false lived on that socket only: not over HTTP, not on a new socket
    assert httpx.get(f"{srv.url}/v1/responses/{first['id']}").status_code == 404
    with connect(ws_url(srv)) as ws:
        miss = turn(ws, model="scripted-a", store=False, previous_response_id=first["id"], input="hi")
        assert miss == [{"type": "error", "status": 400, "error": {
            "type": "invalid_request_error", "code": "previous_response_not_found",
            "message": f"Previous response with id '{first['id']}' not found.", "param": "previous_response_id"}}]
        # and the socket still works after the error
        assert final(turn(ws, model="scripted-a", input="fresh"))["status"] == "completed"


def test_store_true_responses_continue_across_sockets_and_over_http(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        first = final(turn(ws, model="scripted-a", input="hello"))
    assert httpx.get(f"{srv.url}/v1/responses/{first['id']}").json()["status"] == "completed"
    with connect(ws_url(srv)) as ws:
        again = final(turn(ws, model="scripted-a", previous_response_id=first["id"], input="more"))
    assert again["previous_response_id"] == first["id"]


def test_failed_continuation_evicts_the_cached_response(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        first = final(turn(ws, model="scripted-a", store=False, input="remember ember"))
        failed = turn(ws, model="scripted-a", store=False, previous_response_id=first["id"],
                      input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}])
        assert failed[-1]["type"] == "error" and failed[-1]["status"] == 400
        assert "call_nope" in failed[-1]["error"]["message"]
        retry = turn(ws, model="scripted-a", store=False, previous_response_id=first["id"], input="stale?")
        assert retry[-1]["error"]["code"] == "previous_response_not_found"


def test_a_response_that_fails_midway_evicts_too(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        first = final(turn(ws, model="scripted-a", store=False, input="one"))
        broken = turn(ws, model="broken", store=False, previous_response_id=first["id"], input="two")
        assert [e["type"] for e in broken[-2:]] == ["error", "response.failed"]
        retry = turn(ws, model="scripted-a", store=False, previous_response_id=first["id"], input="three")
        assert retry[-1]["error"]["code"] == "previous_response_not_found"


@pytest.mark.parametrize(("message", "code", "param"), [
    ("not json", "invalid_json", None),
    ("[1, 2]", "invalid_json", None),
    ('{"model": "scripted-a", "input": "x"}', "missing_required_parameter", "type"),
    ('{"type": "response.cancel", "response_id": "r"}', "invalid_value", "type"),
    ('{"type": "response.create", "input": "x", "stream": false}', "unsupported_parameter", "stream"),
    ('{"type": "response.create", "input": "x", "stream": "yes"}', "invalid_type", "stream"),
    ('{"type": "response.create", "input": "x", "stream_options": {"include_obfuscation": true}}',
     "unsupported_parameter", "stream_options.include_obfuscation"),
    ('{"type": "response.create"}', "missing_required_parameter", "input"),
    ('{"type": "response.create", "input": [{"type": "message", "role": "pirate", "content": "x"}]}',
     "invalid_value", "input[0].role"),
    ('{"type": "response.create", "input": "x", "model": "nope"}', "model_not_found", "model"),
    ('{"type": "response.create", "input": [{"type": "compaction", "encrypted_content": "forged"}]}',
     "invalid_value", "input[0].encrypted_content"),
])
def test_bad_messages_get_the_spec_error_and_the_socket_goes_on(srv: ServerThread, message: str, code: str,
                                                                param: str | None) -> None:
    with connect(ws_url(srv)) as ws:
        ws.send(message)
        error = json.loads(ws.recv(timeout=10))
        assert error["type"] == "error" and error["status"] == 400
        assert error["error"]["code"] == code and error["error"]["param"] == param, error
        assert error["error"]["message"]
        assert final(turn(ws, model="scripted-a", input="still here"))["status"] == "completed"


def test_stream_true_is_taken_and_ignored(srv: ServerThread) -> None:
    """The Agents SDKs (Python 0.24, JS 0.20) put "stream": true in response.create: the socket streams anyway."""
    with connect(ws_url(srv)) as ws:
        done = final(turn(ws, model="scripted-a", input="hi", stream=True, stream_options={}))
    assert done["status"] == "completed" and done["output_text"]


def test_closing_the_socket_mid_response_cancels_it(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "slow", "input": "long"}))
        created = json.loads(ws.recv(timeout=10))
        assert created["type"] == "response.created"
        ws.recv(timeout=10)
    rid = created["response"]["id"]
    deadline = time.monotonic() + 10
    while (status := httpx.get(f"{srv.url}/v1/responses/{rid}").json()["status"]) == "in_progress":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert status == "cancelled"


def test_background_response_runs_on_after_the_socket_closes(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "slow", "input": "long", "background": True,
                            "max_output_tokens": 20}))
        created = json.loads(ws.recv(timeout=10))
        assert created["response"]["background"] is True
    rid = created["response"]["id"]
    deadline = time.monotonic() + 15
    while (status := httpx.get(f"{srv.url}/v1/responses/{rid}").json()["status"]) in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert status == "incomplete"  # ran to its token limit although nobody was connected


def test_messages_sent_ahead_are_answered_in_order(srv: ServerThread) -> None:
    with connect(ws_url(srv)) as ws:
        for word in ("one", "two", "three"):
            ws.send(json.dumps({"type": "response.create", "model": "scripted-a", "input": word,
                                "metadata": {"word": word}}))
        words = [final(read_turn(ws))["metadata"]["word"] for _ in range(3)]
    assert words == ["one", "two", "three"]


def test_limits_queue_and_connection_age() -> None:
    app = make_app(dialect="openai", websocket_max_queued_messages=2, websocket_max_connection_seconds=0.5,
                   upstreams={"slow": ScriptedUpstream(100, name="slow", models=["slow"], delay_ms=20)})
    with ServerThread(app, ws="websockets-sansio") as srv:
        ws = connect(ws_url(srv))
        with pytest.raises(ConnectionClosed) as closed:
            for _ in range(6):
                ws.send(json.dumps({"type": "response.create", "model": "slow", "input": "x"}))
            while True:
                ws.recv(timeout=10)
        ws.close()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert "websocket_max_queued_messages" in closed.value.rcvd.reason
        with connect(ws_url(srv)) as ws:  # the age limit closes an idle connection too, saying why (issue 30 L1)
            error = json.loads(ws.recv(timeout=10))
            assert error["error"]["code"] == "websocket_connection_limit_reached"


def _key(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["keys", "--file", str(path), "create", "--name", "ws", "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["key"])


def test_handshake_auth_and_nothing_leaks_across_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    first, second = _key(path, capsys), _key(path, capsys)
    with ServerThread(make_app(dialect="openai", keys_file=str(path)), ws="websockets-sansio") as srv:
        with pytest.raises(InvalidStatus) as denied, connect(ws_url(srv)):
            pass
        assert denied.value.response.status_code == 401
        assert json.loads(denied.value.response.body or b"{}")["error"]["code"] == "missing_api_key"
        with pytest.raises(InvalidStatus), connect(ws_url(srv), additional_headers={"Authorization": "Bearer no"}):
            pass
        with connect(ws_url(srv), additional_headers={"Authorization": f"Bearer {first}"}) as ws:
            mine = final(turn(ws, input="secret"))
        with connect(ws_url(srv), additional_headers={"Authorization": f"Bearer {second}"}) as ws:
            theirs = turn(ws, previous_response_id=mine["id"], input="tell me")
        assert theirs[-1]["error"]["code"] == "previous_response_not_found"


def test_rate_limit_applies_per_message() -> None:
    with ServerThread(make_app(dialect="openai", rate_limit_per_minute=2), ws="websockets-sansio") as srv, \
            connect(ws_url(srv)) as ws:
        answers = [turn(ws, input="x")[-1] for _ in range(3)]
    assert [a["type"] for a in answers[:2]] == ["response.completed"] * 2
    assert answers[2]["status"] == 429 and answers[2]["error"]["code"] == "rate_limited"


def test_openresponses_dialect_sends_no_done_sentinel_on_the_socket() -> None:
    with ServerThread(make_app(dialect="openresponses"), ws="websockets-sansio") as srv, connect(ws_url(srv)) as ws:
        final(turn(ws, input="x"))
        final(turn(ws, input="y"))  # a stray [DONE] would be read here first
        ws.send("not json")
        assert json.loads(ws.recv(timeout=10))["error"]["code"] == "invalid_json"
