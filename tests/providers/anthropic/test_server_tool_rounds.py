"""A gateway server tool called by Claude with thinking on: the gateway runs the tool and loops back, and the next
round repeats the assistant turn with its thinking block and exact signature before the tool_use (Anthropic refuses a
tool loop without it), then the tool_result."""

from __future__ import annotations

import httpx

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .conftest import MODELS
from .made_streams import text_stream, thinking_tool_stream
from .simulated_anthropic import Reply, SimulatedAnthropic


def test_server_tool_round_keeps_the_thinking_signature() -> None:
    with SimulatedAnthropic(MODELS) as sim:
        config = Config(dialect="platform", upstreams=[f"anthropic+{sim.url}"], tools={"enabled": ["calculator"]},
                        rewrite={"steps": []}, upstream_options={"retries": 0, "api_key": "k"})
        sim.replies.extend([Reply(thinking_tool_stream("Use the calculator.", "SIG-1", "calculator",
                                                       {"expression": "6*7"}, call_id="toolu_calc")),
                            Reply(text_stream("It is 42."))])
        with ServerThread(create_app(config)) as gateway:
            response = httpx.post(f"{gateway.base_url}/responses", timeout=30, json={
                "model": MODELS[0], "input": "What is 6*7? Use the calculator.", "stream": False,
                "reasoning": {"effort": "low"}})
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "completed" and "42" in response.json()["output_text"]
        assert sim.problems == [] and len(sim.requests) == 2
        turns = sim.requests[1].body["messages"]
        assert [t["role"] for t in turns] == ["user", "assistant", "user"]
        assert turns[1]["content"][0] == {"type": "thinking", "thinking": "Use the calculator.", "signature": "SIG-1"}
        assert turns[1]["content"][1]["type"] == "tool_use" and turns[1]["content"][1]["id"] == "toolu_calc"
        result = turns[2]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_calc" and "42" in result["content"]
