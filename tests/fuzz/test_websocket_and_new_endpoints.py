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


# Header values as they can be on the wire: printable ASCII without leading or trailing spaces.
HEADER_TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60)


def test_websocket_handshake_host_and_origin(open_gateway: tuple[str, httpx.Client]) -> None:
    """Any Host / Origin on the upgrade: accepted (a loopback Host, no Origin or the gateway's own) and working, or
    refused before the handshake with 403 and the error envelope; never a 5xx, never a dead server."""
    import socket

    from hypothesis import assume
    from websockets.exceptions import InvalidStatus, InvalidURI
    from websockets.uri import parse_uri

    from respstream.server.http.web_security import is_loopback_host

    url, _ = open_gateway
    port = int(url.rsplit(":", 1)[1])

    @FUZZ
    @given(host=HEADER_TEXT.filter(lambda h: "/" not in h and "@" not in h and "?" not in h and "#" not in h),
           origin=st.none() | HEADER_TEXT | st.sampled_from(["same", "null"]))
    def run(host: str, origin: str | None) -> None:
        host = host or "127.0.0.1"
        if origin == "same":
            origin = f"http://127.0.0.1:{port}"
            host = f"127.0.0.1:{port}"
        try:
            uri = parse_uri(f"ws://{host}/v1/responses")
        except (InvalidURI, ValueError):
            assume(False)  # a Host the client library itself cannot put in a request
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        kwargs: dict[str, Any] = {"sock": sock, "open_timeout": 5}
        if origin is not None:
            kwargs["origin"] = origin
        try:
            with connect(f"ws://{host}/v1/responses", **kwargs) as ws:
                ws.send(json.dumps({"type": "response.create", "input": "hi"}))
                assert _read_turn(ws)[-1]["type"] == "response.completed"
            assert is_loopback_host(uri.host), f"Host {host!r} was accepted"
        except InvalidStatus as exc:
            assert exc.response.status_code == 403, exc.response.status_code
            error = json.loads(exc.response.body)["error"]
            assert error["code"] in ("host_not_allowed", "cross_origin_request") and error["message"]
        finally:
            sock.close()

    run()
    assert _read_first_event(url) == "response.created"


def _read_first_event(url: str) -> str:
    with connect(url.replace("http://", "ws://") + "/v1/responses") as ws:
        ws.send(json.dumps({"type": "response.create", "input": "hi"}))
        return str(json.loads(ws.recv(timeout=20))["type"])


QUERY = st.dictionaries(st.sampled_from(["limit", "after", "before", "order", "include", "include[]"]),
                        HEADER_TEXT | st.integers(-(2**70), 2**70).map(str), max_size=4)


def test_list_endpoints_query_parameters_never_5xx(open_gateway: tuple[str, httpx.Client]) -> None:
    """The GET endpoints beside create (a response's input items, a conversation and its items), with arbitrary
    query parameters and ids: the error envelope or a list, never a 5xx."""
    _, client = open_gateway
    rid = client.post("/v1/responses", json={"input": "x", "stream": False}).json()["id"]
    conv = client.post("/v1/conversations", json={"items": [{"type": "message", "role": "user",
                                                              "content": "hi"}]}).json()["id"]
    paths = [f"/v1/responses/{rid}/input_items", f"/v1/conversations/{conv}/items", f"/v1/conversations/{conv}",
             "/v1/responses/resp_nope/input_items", "/v1/conversations/conv_nope/items", "/v1/models", "/readyz"]

    @FUZZ
    @given(path=st.sampled_from(paths), query=QUERY, method=st.sampled_from(["GET", "DELETE"]))
    def run(path: str, query: dict[str, str], method: str) -> None:
        if method == "DELETE" and not path.startswith("/v1/conversations/conv_nope"):
            method = "GET"  # keep the fixtures alive; deleting what does not exist is the case under test
        response = client.request(method, path, params=query)
        if response.status_code >= 400 and path != "/readyz":
            assert_envelope(response)
        else:
            assert response.status_code < 500 or path == "/readyz", response.text[:300]

    run()
