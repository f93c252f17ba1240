"""`make serve`'s default model end to end: Qwen2.5-Coder-1.5B-Instruct through the real gateway (llama.cpp via
xllamacpp). Two short prompts only: a grounded calculation and a client function tool (the model writes the call
as JSON text; the gateway turns it into a function_call)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.server_thread import ServerThread
from respstream.cli import main
from respstream.server.app import Components, create_app
from respstream.server.config import Config
from respstream.server.upstream.embedded import EmbeddedUpstream

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


def test_the_default_model_states_the_calculators_result(gateway: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream", "What is 17 * 23?", "--url", gateway, "--json", "--max-output-tokens", "48",
                 "--idle-timeout", "240"]) in (0, 5)
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == "qwen2.5-coder-1.5b-instruct"
    assert "391" in result["output_text"], result["output_text"]
    calls = [item for item in result["output"] if item.get("name") == "calculator"]
    assert calls and calls[0]["output"] == "391"


def test_the_default_model_calls_a_client_function_tool(gateway: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=gateway, api_key="unused", timeout=240)
    tool = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                           "additionalProperties": False}}
    response = client.responses.create(model="auto", input="What is the weather in Paris right now?",
                                       tools=[tool], max_output_tokens=64)  # type: ignore[list-item]
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls, response.output
    assert calls[0].name == "get_weather" and json.loads(calls[0].arguments)["city"].lower() == "paris"
