"""WebSocket mode in front of Gemini, as Codex uses it: ``store: false`` turns continued on the socket with
``previous_response_id``; the call's signature goes back to Gemini from the socket's own history."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from websockets.sync.client import connect

from fakes.server_thread import ServerThread
from providers.gemini.conftest import API_KEY, CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini
from providers.socket_turns import completed_turn, socket_gateway


@pytest.fixture(scope="module")
def gemini_gateway(simulated: tuple[SimulatedGemini, ServerThread]) -> Iterator[ServerThread]:
    options = {"api_key": API_KEY, "retries": 0, "models": ["gemini-2.5-flash"]}
    with socket_gateway(f"gemini+{simulated[1].url}", options) as server:
        yield server


def test_store_false_turns_on_a_socket_send_the_signature_back(fake: SimulatedGemini,
                                                               gemini_gateway: ServerThread) -> None:
    case = next(c for c in CASES if c["case"] == "fantasy__thought-then-call.sse")
    text = next(c for c in CASES if c["case"] == "pydantic-ai__text-3-chunks.sse")
    fake.queue(Reply(200, (PROVIDERS / case["file"]).read_bytes()), Reply(200, (PROVIDERS / text["file"]).read_bytes()))
    request = {"model": "gemini-2.5-flash", "store": False, "tools": case["request"]["tools"]}
    with connect(f"ws://127.0.0.1:{gemini_gateway.port}/v1/responses") as ws:
        first = completed_turn(ws, input=case["request"]["input"], **request)
        call = next(i for i in first["output"] if i["type"] == "function_call")
        second = completed_turn(ws, previous_response_id=first["id"], **request,
                                input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}])
    assert second["output_text"] == text["expect"]["output_text"]
    model_turn = fake.requests[-1][1]["contents"][1]
    assert model_turn["parts"][0]["thoughtSignature"] == case["expect"]["reasoning"]["signatures"][0]["value"]
    assert model_turn["parts"][0]["functionCall"]["name"] == "weather"
