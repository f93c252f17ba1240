"""WebSocket mode in front of a provider adapter, as Codex uses it (tests/providers/*/test_websocket.py): the gateway
on loopback with WebSocket mode on and the provider's SIMULATED upstream, and one ``response.create`` turn read to
its end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.client import ClientConnection

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

__all__ = ["completed_turn", "socket_gateway"]

TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


@contextmanager
def socket_gateway(upstream: str, upstream_options: dict[str, Any]) -> Iterator[ServerThread]:
    """The openai dialect on ``upstream`` alone, with no gateway tools or rewrites (the provider sees the client's
    request), served by uvicorn's WebSocket implementation as `respstream serve` runs it."""
    config = Config(dialect="openai", upstreams=[upstream], upstream_options=upstream_options,
                    tools={"enabled": []}, rewrite={"steps": []})
    with ServerThread(create_app(config), ws="websockets-sansio") as server:
        yield server


def completed_turn(ws: ClientConnection, **body: Any) -> dict[str, Any]:
    """Send one response.create and read to its end: the response of its ``response.completed`` (any other end, or
    an error event, fails the test)."""
    ws.send(json.dumps({"type": "response.create", **body}))
    while True:
        event = json.loads(ws.recv(timeout=20))
        if event["type"] in TERMINALS or event["type"] == "error":
            assert event["type"] == "response.completed", event
            return dict(event["response"])
