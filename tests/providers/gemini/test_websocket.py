"""WebSocket mode in front of Gemini, as Codex uses it: ``store: false`` turns continued on the socket with
``previous_response_id``; the call's signature goes back to Gemini from the socket's own history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from fakes.server_thread import ServerThread
from providers.gemini.conftest import API_KEY, CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini
from respstream.server.config import Config
from respstream.server.http.app import create_app

TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module")
def socket_gateway(simulated: tuple[SimulatedGemini, ServerThread]) -> Iterator[ServerThread]:
    config = Config(dialect="openai", upstreams=[f"gemini+{simulated[1].url}"],
                    upstream_options={"api_key": API_KEY, "retries": 0, "models": ["gemini-2.5-flash"]},
                    tools={"enabled": []}, rewrite={"steps": []})
    with ServerThread(create_app(config), ws="websockets-sansio") as server:
        yield server


def _turn(ws: ClientConnection, **body: Any) -> dict[str, Any]:
    ws.send(json.dumps({"type": "response.create", **body}))
    while True:
        event = json.loads(ws.recv(timeout=20))
        if event["type"] in TERMINALS or event["type"] == "error":
            assert event["type"] == "response.completed", event
            return dict(event["response"])


def test_store_false_turns_on_a_socket_send_the_signature_back(fake: SimulatedGemini,
                                                               socket_gateway: ServerThread) -> None:
    case = next(c for c in CASES if c["case"] == "fantasy__thought-then-call.sse")
    text = next(c for c in CASES if c["case"] == "pydantic-ai__text-3-chunks.sse")
    fake.queue(Reply(200, (PROVIDERS / case["file"]).read_bytes()), Reply(200, (PROVIDERS / text["file"]).read_bytes()))
    tools = case["request"]["tools"]
    with connect(f"ws://127.0.0.1:{socket_gateway.port}/v1/responses") as ws:
        first = _turn(ws, model="gemini-2.5-flash", store=False, input=case["request"]["input"], tools=tools)
        call = next(i for i in first["output"] if i["type"] == "function_call")
        second = _turn(ws, model="gemini-2.5-flash", store=False, previous_response_id=first["id"], tools=tools,
                       input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}])
    assert second["output_text"] == text["expect"]["output_text"]
    model_turn = fake.requests[-1][1]["contents"][1]
    assert model_turn["parts"][0]["thoughtSignature"] == case["expect"]["reasoning"]["signatures"][0]["value"]
    assert model_turn["parts"][0]["functionCall"]["name"] == "weather"
