"""Item 13 of issue 13 for WebSocket mode: the open gateway's Host/Origin checks apply to the ``/v1/responses``
WebSocket handshake too (browsers apply no CORS to WebSockets, so any page could otherwise drive the gateway).

A real gateway app in uvicorn with its WebSocket stack, a real ``websockets`` client over loopback; the model is the
SIMULATED scripted upstream. A refused handshake is a 403 with the JSON error envelope, before any accept."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from respstream.server.http.auth import KeyStore
from server.helpers import ServerThread, make_app

CREATE = json.dumps({"type": "response.create", "input": "hi"})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with ServerThread(make_app(), ws="websockets-sansio") as srv:
        yield int(srv.url.rsplit(":", 1)[1])


def _first_event(ws_url: str, **kwargs: object) -> dict[str, object]:
    with connect(ws_url, open_timeout=5, **kwargs) as ws:  # type: ignore[arg-type]
        ws.send(CREATE)
        return json.loads(ws.recv(timeout=10))  # type: ignore[no-any-return]


def _refused(ws_url: str, **kwargs: object) -> dict[str, object]:
    with pytest.raises(InvalidStatus) as info, connect(ws_url, open_timeout=5, **kwargs):  # type: ignore[arg-type]
        pass
    response = info.value.response
    assert response.status_code == 403, response.status_code
    return json.loads(response.body)["error"]  # type: ignore[no-any-return]


def test_foreign_origin_is_refused_before_the_handshake(port: int) -> None:
    for origin in ("http://evil.example", f"http://evil.example:{port}", "null", f"https://127.0.0.1:{port}"):
        error = _refused(f"ws://127.0.0.1:{port}/v1/responses", origin=origin)
        assert error["code"] == "cross_origin_request" and "WebSocket" in str(error["message"]), error
        assert origin in str(error["message"])


def test_rebinding_host_is_refused(port: int) -> None:
    # DNS rebinding: the attacker's name resolves to 127.0.0.1, so the socket reaches us with Host: evil.example.
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    error = _refused(f"ws://evil.example:{port}/v1/responses", sock=sock, origin=f"http://evil.example:{port}")
    assert error["code"] == "host_not_allowed" and "evil.example" in str(error["message"]), error
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    error = _refused(f"ws://evil.example:{port}/v1/responses", sock=sock)  # no Origin: still the wrong Host
    assert error["code"] == "host_not_allowed", error


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_same_origin_and_no_origin_are_served(port: int, host: str) -> None:
    url = f"ws://{host}:{port}/v1/responses"
    assert _first_event(url, origin=f"http://{host}:{port}")["type"] == "response.created"  # the playground page
    assert _first_event(url)["type"] == "response.created"  # a non-browser client sends no Origin


def test_keyed_gateway_leaves_the_origin_to_the_key(tmp_path: object) -> None:
    from pathlib import Path

    keys_file = Path(str(tmp_path)) / "keys.json"
    store = KeyStore(keys_file)
    key, _ = store.create("test")
    with ServerThread(make_app(keys_file=str(keys_file)), ws="websockets-sansio") as srv:
        wsport = int(srv.url.rsplit(":", 1)[1])
        url = f"ws://127.0.0.1:{wsport}/v1/responses"
        # No key: 401 whatever the Origin (a browser page cannot attach one to a WebSocket handshake).
        with pytest.raises(InvalidStatus) as info, connect(url, open_timeout=5, origin="http://evil.example"):
            pass
        assert info.value.response.status_code == 401
        event = _first_event(url, additional_headers={"Authorization": f"Bearer {key}"})
        assert event["type"] == "response.created"
