"""`make serve`'s default model end to end: Qwen2.5-Coder-1.5B-Instruct through the real gateway (llama.cpp via
xllamacpp). Few, short prompts: a grounded calculation, and an OpenAI Agents SDK run with a function tool (the model
writes the call as JSON text; the gateway turns it into a function_call; the SDK runs it and the model answers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

pytestmark = [pytest.mark.model, pytest.mark.slow]

if not EmbeddedUpstream.available("large"):
    pytest.skip("the default model is not installed (make install-model)", allow_module_level=True)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    upstream = EmbeddedUpstream(n_parallel=1, n_ctx=2048)  # the default size: large
    assert upstream.models[0] == "qwen2.5-coder-1.5b-instruct"
    data = Path(tmp_path_factory.mktemp("default-model"))
    app = create_app(Config(upstreams=["embedded"], dialect="openai", data_dir=str(data)),
                     Components(upstreams=[upstream]))
    with ServerThread(app, start_timeout=180) as srv:
        yield srv.base_url


def test_the_default_model_states_the_calculators_result(gateway: str) -> None:
    # The openai dialect runs a server tool only when the request lists it (issue 11): the calculator is asked for.
    body = {"input": "What is 17 * 23?", "tools": [{"type": "calculator"}], "max_output_tokens": 48, "stream": False}
    result = httpx.post(f"{gateway}/responses", json=body, timeout=240).json()
    assert result["status"] in ("completed", "incomplete"), result
    assert result["model"] == "qwen2.5-coder-1.5b-instruct"
    assert "391" in result["output_text"], result["output_text"]
    calls = [item for item in result["output"] if item.get("name") == "calculator"]
    assert calls and calls[0]["output"] == "391"


async def test_the_default_model_runs_an_agents_sdk_function_tool(gateway: str) -> None:
    from agents import Runner

    from interop.weather_agent import weather_agent

    calls: list[str] = []
    agent, client = weather_agent(gateway, calls, timeout=300)
    try:
        result = await Runner.run(agent, "What is the weather in Paris?", max_turns=3)
    finally:
        await client.close()
    # The model writes the call as text; the gateway makes it a call.
    assert [c.lower() for c in calls] == ["paris"], result.final_output
    assert isinstance(result.final_output, str) and result.final_output.strip()
