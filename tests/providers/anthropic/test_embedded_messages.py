"""The Anthropic adapter on a real Anthropic-shaped server: llama.cpp's own ``POST /v1/messages`` (the embedded
SmolLM2-135M through ``xllamacpp``, spec ``anthropic+embedded:small``) behind the gateway. A text turn and a tool
turn (the call and its result sent back as Anthropic tool_use / tool_result blocks) end cleanly with zero
violations; structured output (text.format json_schema) and a forced tool, which llama.cpp's /v1/messages would drop,
are refused with a 400 naming the field (on the small model; the large one: test_embedded_forced.py). Needs the
embedded model (``make install-model``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .conftest import post

pytestmark = [pytest.mark.model, pytest.mark.slow]

WEATHER = {"type": "function", "name": "weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[ServerThread, str]]:
    if not EmbeddedUpstream.available("small"):
        pytest.skip("the embedded model is not installed (make install-model)")
    config = Config(dialect="openai", upstreams=["anthropic+embedded:small"], tools={"enabled": []},
                    rewrite={"steps": []}, upstream_options={"n_parallel": 1})
    with ServerThread(create_app(config), start_timeout=120) as server:
        models = [m["id"] for m in httpx.get(f"{server.base_url}/models", timeout=10).json()["data"]
                  if m["id"] != "auto"]
        yield server, models[0]


def test_text_turn(gateway: tuple[ServerThread, str]) -> None:
    server, model = gateway
    got, violations, response = post(server, {"model": model, "input": "Say hello.", "max_output_tokens": 16})
    assert response.status_code == 200, response.text
    assert violations == []
    assert got["status"] in ("completed", "incomplete"), got["error"]
    assert got["output_text"].strip()
    # (llama.cpp's message_start reports the prompt it has read so far: on a loaded machine sometimes 0)
    assert got["usage"]["output_tokens"] > 0


def test_tool_turn(gateway: tuple[ServerThread, str]) -> None:
    server, model = gateway
    history = [{"type": "message", "role": "user", "content": "What is the weather in Paris?"},
               {"type": "function_call", "call_id": "toolu_1", "name": "weather", "arguments": '{"city": "Paris"}'},
               {"type": "function_call_output", "call_id": "toolu_1", "output": "Sunny, 21 C"}]
    got, violations, response = post(server, {"model": model, "input": history, "tools": [WEATHER],
                                              "max_output_tokens": 24, "store": False})
    assert response.status_code == 200, response.text
    assert violations == []
    assert got["status"] in ("completed", "incomplete"), got["error"]
    assert got["output_text"].strip() or got["tool_calls"]


# -- structured output and forced tools: what llama.cpp's /v1/messages cannot do is refused up front ----------------
# Measured on loopback (xllamacpp 2026.10.11549, SmolLM2-135M and Qwen2.5-Coder-1.5B): its /v1/messages answers free
# text whatever output_config.format says, and a tool_choice of {"type": "any"} or a named tool still gets text (no
# tool_use block). On the Qwen sizes an assistant prefill of the call opener forces the call (test_embedded_forced.py);
# SmolLM2's template renders no tools, so on the small model sending them would drop them silently: 400 naming the
# field.

CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
               "required": ["city", "sunny"], "additionalProperties": False}


def test_structured_output_is_refused_naming_text_format(gateway: tuple[ServerThread, str]) -> None:
    server, model = gateway
    _, _, response = post(server, {"model": model, "input": "Is it sunny in Paris?", "max_output_tokens": 24,
                                   "text": {"format": {"type": "json_schema", "name": "weather",
                                                       "schema": CITY_SCHEMA, "strict": True}}})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "text.format" and error["code"] == "unsupported_parameter", error
    assert "output_config.format" in error["message"] and "embedded" in error["message"], error


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "weather"}])
def test_a_forced_tool_is_refused_naming_tool_choice(gateway: tuple[ServerThread, str], choice: object) -> None:
    server, model = gateway
    _, _, response = post(server, {"model": model, "input": "What is the weather in Paris?", "tools": [WEATHER],
                                   "tool_choice": choice, "max_output_tokens": 16})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "tool_choice", response.text


def test_plain_text_format_still_streams(gateway: tuple[ServerThread, str]) -> None:
    server, model = gateway
    got, violations, response = post(server, {"model": model, "input": "Say hi.", "max_output_tokens": 8,
                                              "text": {"format": {"type": "text"}}})
    assert response.status_code == 200, response.text
    assert violations == [] and got["status"] in ("completed", "incomplete"), got["error"]
