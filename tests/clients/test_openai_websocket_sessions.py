"""The official SDKs' WebSocket helpers (Python ``client.responses.connect()``; Node ``ResponsesWS`` in
node/ws_sessions.mjs), unmodified, against the gateway: two
``stream_id`` lanes on one socket, a fork from one lane into a new one, and a ``connection.response.steer`` of a
running response (its ``steered`` end and the successor the server starts by itself). The upstream is SIMULATED
(the scripted one, paced so a steer lands mid-response); the gateway, uvicorn and the socket are real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .conftest import missing

pytestmark = pytest.mark.clients
NODE_DIR = Path(__file__).parent / "node"
TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module", params=["openai", "openresponses"])
def base_url(request: pytest.FixtureRequest) -> Iterator[str]:
    app = create_app(Config(dialect=request.param, upstreams=["scripted:30?delay_ms=40"]))
    with ServerThread(app, ws="websockets-sansio") as server:
        yield server.base_url


def connect(base_url: str) -> Any:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="test-key")
    return client.responses.connect()


def test_lanes_and_a_fork_with_the_sdk(base_url: str) -> None:
    with connect(base_url) as conn:
        conn.response.create(model="auto", input="Lane A says heron.", stream_id="a", store=False)
        conn.response.create(model="auto", input="Lane B.", stream_id="b", store=False)
        ended: dict[str, Any] = {}
        lanes_seen: list[str] = []
        while len(ended) < 2:
            event = conn.recv()
            lanes_seen.append(event.stream_id)
            if event.type in TERMINALS:
                ended[event.stream_id] = event.response
        assert {ended["a"].status, ended["b"].status} == {"completed"}
        first_end = min(len(lanes_seen) - lanes_seen[::-1].index(lane) for lane in ("a", "b"))
        assert set(lanes_seen[:first_end]) == {"a", "b"}  # interleaved, not one after the other
        conn.response.create(model="auto", input="Fork.", stream_id="fork", previous_response_id=ended["a"].id,
                             store=False)
        while True:
            event = conn.recv()
            assert event.stream_id == "fork"
            if event.type in TERMINALS:
                break
    assert event.response.status == "completed" and event.response.previous_response_id == ended["a"].id


def test_steer_with_the_sdk(base_url: str) -> None:
    with connect(base_url) as conn:
        conn.response.create(model="auto", input="Talk for a while.", stream_id="main")
        rid, deltas = None, 0
        while deltas < 2:
            event = conn.recv()
            if event.type == "response.created":
                rid = event.response.id
            deltas += event.type == "response.output_text.delta"
        assert rid is not None
        conn.response.steer(previous_response_id=rid, input="Now talk about owls.")
        seen: list[Any] = []
        while len([e for e in seen if e.type in TERMINALS]) < 2:
            seen.append(conn.recv())
    kinds = [e.type for e in seen]
    accepted = seen[kinds.index("response.steer.accepted")]
    assert accepted.steer.previous_response_id == rid and accepted.stream_id == "main"
    original, successor = [e.response for e in seen if e.type in TERMINALS]
    assert original.id == rid and original.status == "incomplete"
    assert original.incomplete_details is not None and original.incomplete_details.reason == "steered"
    assert successor.status == "completed" and successor.previous_response_id == rid
    assert all(e.stream_id == "main" for e in seen)


@pytest.fixture(scope="module")
def node_report(base_url: str) -> dict[str, Any]:
    """node/ws_sessions.mjs (the npm SDK's ResponsesWS) run once against this gateway."""
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules" / ".package-lock.json").exists():
        missing("the Node clients are not installed (`make clients`: node and npm ci in tests/clients/node)")
    env = {**os.environ, "NODE_NO_WARNINGS": "1"}
    done = subprocess.run([node, "--experimental-websocket", "ws_sessions.mjs", base_url], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=90, env=env, check=False)
    assert done.returncode == 0, f"ws_sessions.mjs exited {done.returncode}: {done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_lanes_and_a_fork_with_the_node_sdk(node_report: dict[str, Any]) -> None:
    seen = node_report["lanes_and_fork"]
    assert seen["ok"], seen.get("error")
    lanes = seen["lanes"]
    first_end = min(len(lanes) - lanes[::-1].index(lane) for lane in ("a", "b"))
    assert set(lanes) == {"a", "b"} and set(lanes[:first_end]) == {"a", "b"}
    assert seen["statuses"] == {"a": "completed", "b": "completed"}
    assert seen["fork_lanes"] == ["fork"] and seen["fork_status"] == "completed"
    assert seen["fork_previous"] == seen["parent"]


def test_steer_with_the_node_sdk(node_report: dict[str, Any]) -> None:
    seen = node_report["steer"]
    assert seen["ok"], seen.get("error")
    assert seen["accepted"]["steer"]["previous_response_id"] == seen["rid"]
    assert seen["original"] == {"id": seen["rid"], "status": "incomplete", "incomplete_details": {"reason": "steered"}}
    assert seen["successor"] == {"status": "completed", "previous_response_id": seen["rid"]}
    assert seen["lanes"] == ["main"]
