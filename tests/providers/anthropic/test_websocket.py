"""WebSocket mode in front of Claude, as Codex uses it: ``store: false`` turns continued on the socket with
``previous_response_id``; the signed thinking and the call go back to Anthropic from the socket's own history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .conftest import CASES, body_of
from .simulated_anthropic import Reply, SimulatedAnthropic

TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module")
def socket_gateway(provider: SimulatedAnthropic) -> Iterator[ServerThread]:
    config = Config(dialect="openai", upstreams=[f"anthropic+{provider.url}"],
                    upstream_options={"api_key": "sk-ant-test-key", "retries": 0},
                    tools={"enabled": []}, rewrite={"steps": []})
    with ServerThread(create_app(config), ws="websockets-sansio") as server:
        yield server


def turn(ws: ClientConnection, **body: Any) -> dict[str, Any]:
    ws.send(json.dumps({"type": "response.create", **body}))
    while True:
        event = json.loads(ws.recv(timeout=20))
        if event["type"] in TERMINALS or event["type"] == "error":
            assert event["type"] == "response.completed", event
            return dict(event["response"])


def test_store_false_turns_on_a_socket_send_the_signed_thinking_back(sim: SimulatedAnthropic,
                                                                    socket_gateway: ServerThread) -> None:
    case = CASES["fantasy__thinking-then-tool.sse"]
    follow_up = CASES["langchaingo__text-count.sse"]
    sim.replies.extend([Reply(body_of(case)), Reply(body_of(follow_up))])
    request = {"model": case["model"], "store": False, "tools": case["request"]["tools"],
               "reasoning": {"effort": "medium"}}
    with connect(f"ws://127.0.0.1:{socket_gateway.port}/v1/responses") as ws:
        first = turn(ws, input=case["request"]["input"], **request)
        call = next(i for i in first["output"] if i["type"] == "function_call")
        second = turn(ws, previous_response_id=first["id"], **request,
                      input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}])
    assert second["output"][-1]["content"][0]["text"] == follow_up["expect"]["output_text"]
    turns = sim.requests[1].body["messages"]
    signature = case["expect"]["reasoning"]["signatures"][0]["value"]
    assert turns[1]["content"][0] == {"type": "thinking", "thinking": case["expect"]["reasoning"]["text"],
                                      "signature": signature}
    assert turns[1]["content"][1]["id"] == call["call_id"]
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": call["call_id"], "content": "sunny"}
    assert sim.problems == []
