"""The OpenAI Agents SDK (unmodified) through the gateway on ``anthropic+embedded:small``: the embedded SmolLM2-135M
behind llama.cpp's own ``POST /v1/messages``, no simulated part.

What a real model call can and cannot be here: on the small model llama.cpp's /v1/messages never returns a
``tool_use`` block (SmolLM2's chat template does not render tools, so nothing can force a call: measured on
loopback), so the SDK's forced tool is refused with a 400 naming ``tool_choice`` before anything runs, and the
round trip is carried from the SDK's side (the large model, where the model makes the call, is
test_embedded_forced.py, forced, and test_embedded_auto_calls.py, under the SDK's default tool_choice auto): the
run's input holds the agent's earlier ``get_weather`` call and its output (the SDK's own item shapes), the gateway
sends them to llama.cpp as a ``tool_use`` and, right after it, its ``tool_result``, and the model's answer ends the
run. Needs the embedded model (``make install-model``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import Agent, ModelSettings, Runner
from openai import AsyncOpenAI

from fakes.server_thread import ServerThread
from interop.weather_agent import weather_agent as sdk_weather_agent
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def gateway() -> Iterator[ServerThread]:
    if not EmbeddedUpstream.available("small"):
        pytest.skip("the embedded model is not installed (make install-model)")
    config = Config(dialect="openai", upstreams=["anthropic+embedded:small"], tools={"enabled": []},
                    rewrite={"steps": []}, upstream_options={"n_parallel": 1})
    with ServerThread(create_app(config), start_timeout=120) as server:
        yield server


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every /v1/messages body the adapter sends llama.cpp (the real bodies, recorded on their way out)."""
    bodies: list[dict[str, Any]] = []
    build = AnthropicUpstream.body

    def recording(self: AnthropicUpstream, *args: Any, **kwargs: Any) -> dict[str, Any]:
        body = build(self, *args, **kwargs)
        bodies.append(body)
        return body

    monkeypatch.setattr(AnthropicUpstream, "body", recording)
    return bodies


def weather_agent(server: ServerThread, calls: list[str], settings: ModelSettings) -> tuple[Agent[Any], AsyncOpenAI]:
    return sdk_weather_agent(server.base_url, calls, model="smollm2-135m-instruct", timeout=300,
                             instructions="Answer in one short sentence.", settings=settings)


async def test_a_forced_tool_is_refused_before_anything_runs(gateway: ServerThread,
                                                             sent: list[dict[str, Any]]) -> None:
    calls: list[str] = []
    agent, client = weather_agent(gateway, calls, ModelSettings(tool_choice="required", max_tokens=16))
    with pytest.raises(openai.BadRequestError) as refused:
        await Runner.run(agent, "What is the weather in Paris?", max_turns=2)
    await client.close()
    assert refused.value.param == "tool_choice", refused.value.body
    assert calls == [] and sent == []  # (nothing reached llama.cpp)


async def test_the_sdk_tool_round_trip_goes_through_llama_cpp_messages(gateway: ServerThread,
                                                                       sent: list[dict[str, Any]]) -> None:
    calls: list[str] = []
    agent, client = weather_agent(gateway, calls, ModelSettings(max_tokens=96, temperature=0.0, store=False))
    history: list[Any] = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": "call_sdk_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_sdk_1", "output": "sunny and 21 C in Paris"},
    ]
    result = await Runner.run(agent, history, max_turns=2)
    await client.close()
    assert isinstance(result.final_output, str) and result.final_output.strip(), result.raw_responses
    assert calls == []  # (the model answered; it made no new call)
    assert len(sent) == 1, sent
    turns = sent[0]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"], turns
    assert turns[1]["content"][-1] == {"type": "tool_use", "id": "call_sdk_1", "name": "get_weather",
                                       "input": {"city": "Paris"}}
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_sdk_1",
                                      "content": "sunny and 21 C in Paris"}
    # (after a tool result the pipeline offers the embedded model no tools: it answers; pipeline.py's _round)
    offered = {key: value for key, value in sent[0].items() if key != "messages"}
    assert "tools" not in offered and "tool_choice" not in offered, offered
