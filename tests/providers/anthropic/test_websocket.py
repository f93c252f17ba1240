"""WebSocket mode in front of Claude, as Codex uses it: ``store: false`` turns continued on the socket with
``previous_response_id``; the signed thinking and the call go back to Anthropic from the socket's own history."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from websockets.sync.client import connect

from fakes.server_thread import ServerThread
from providers.socket_turns import completed_turn, socket_gateway

from .conftest import CASES, body_of
from .simulated_anthropic import Reply, SimulatedAnthropic


@pytest.fixture(scope="module")
def anthropic_gateway(provider: SimulatedAnthropic) -> Iterator[ServerThread]:
    with socket_gateway(f"anthropic+{provider.url}", {"api_key": "sk-ant-test-key", "retries": 0}) as server:
        yield server


def test_store_false_turns_on_a_socket_send_the_signed_thinking_back(sim: SimulatedAnthropic,
                                                                    anthropic_gateway: ServerThread) -> None:
    case = CASES["fantasy__thinking-then-tool.sse"]
    follow_up = CASES["langchaingo__text-count.sse"]
    sim.replies.extend([Reply(body_of(case)), Reply(body_of(follow_up))])
    request = {"model": case["model"], "store": False, "tools": case["request"]["tools"],
               "reasoning": {"effort": "medium"}}
    with connect(f"ws://127.0.0.1:{anthropic_gateway.port}/v1/responses") as ws:
        first = completed_turn(ws, input=case["request"]["input"], **request)
        call = next(i for i in first["output"] if i["type"] == "function_call")
        second = completed_turn(ws, previous_response_id=first["id"], **request,
                                input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}])
    assert second["output"][-1]["content"][0]["text"] == follow_up["expect"]["output_text"]
    turns = sim.requests[1].body["messages"]
    signature = case["expect"]["reasoning"]["signatures"][0]["value"]
    assert turns[1]["content"][0] == {"type": "thinking", "thinking": case["expect"]["reasoning"]["text"],
                                      "signature": signature}
    assert turns[1]["content"][1]["id"] == call["call_id"]
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": call["call_id"], "content": "sunny"}
    assert sim.problems == []
