"""Bad input for WebSocket mode and the endpoints beside create (compact, input_tokens, Conversations), over
loopback: property-based (hypothesis) messages and bodies. Properties: the socket answers every message with the
spec's error envelope (status < 500) or a protocol-valid response ending in its terminal, and keeps working; the
HTTP endpoints never answer 5xx and always with the error envelope. SIMULATED scripted upstream."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from .test_http_api import EXAMPLES, JSON, assert_envelope

FUZZ = settings(max_examples=max(20, EXAMPLES // 2), deadline=None, suppress_health_check=list(HealthCheck),
                database=None)
FIELDS = ["model", "input", "store", "previous_response_id", "tools", "stream", "background", "instructions",
          "metadata", "max_output_tokens", "conversation", "tool_choice", "temperature", "type", "items"]
BODIES = st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=5)
TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


def _read_turn(ws: Any) -> list[dict[str, Any]]:
    events = []
    while True:
        event = json.loads(ws.recv(timeout=20))
        events.append(event)
        if event["type"] in TERMINALS or (event["type"] == "error" and "status" in event):
            return events


def test_websocket_messages(open_gateway: tuple[str, httpx.Client]) -> None:
    url, _ = open_gateway
    ws_url = url.replace("http://", "ws://") + "/v1/responses"
    with connect(ws_url) as ws:

        @FUZZ
        @given(body=BODIES | JSON, create=st.booleans(), raw=st.booleans())
        def run(body: Any, create: bool, raw: bool) -> None:
            if create and isinstance(body, dict):
                body = {**body, "type": "response.create"}
            ws.send(json.dumps(body) if not raw else json.dumps(body)[:-1])
            events = _read_turn(ws)
            last = events[-1]
            if last["type"] == "error":
                assert 400 <= last["status"] < 500, last
                assert {"code", "message"} <= set(last["error"]) and last["error"]["message"]
            else:
                assert [e["sequence_number"] for e in events] == list(range(len(events)))

        run()
        ws.send(json.dumps({"type": "response.create", "input": "still alive?"}))
        assert _read_turn(ws)[-1]["type"] == "response.completed"


def test_new_endpoints_never_5xx(open_gateway: tuple[str, httpx.Client]) -> None:
    _, client = open_gateway
    conv = client.post("/v1/conversations", json={}).json()["id"]
    paths = ["/v1/responses/compact", "/v1/responses/input_tokens", "/v1/conversations",
             f"/v1/conversations/{conv}", f"/v1/conversations/{conv}/items"]

    @FUZZ
    @given(path=st.sampled_from(paths), body=BODIES | JSON)
    def run(path: str, body: Any) -> None:
        # json.dumps writes Infinity for inf floats: not JSON, so the gateway must answer a clean 400 for it too
        assert_envelope(client.post(path, content=json.dumps(body), headers={"content-type": "application/json"}))

    run()
