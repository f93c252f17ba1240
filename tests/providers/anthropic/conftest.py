"""The recorded Anthropic streams (../shared/providers/anthropic, described by its expected.json), a SIMULATED
Anthropic provider on loopback and the real gateway in front of it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.anthropic.body import AnthropicBody
from respstream.server.upstream.anthropic.stream import AnthropicStream
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .simulated_anthropic import SimulatedAnthropic

# The recorded bodies and their expected outcomes (copied verbatim with their README: sources and licences).
PROVIDERS = Path(__file__).parents[2] / "data" / "providers"
EXPECTED: dict[str, Any] = json.loads((PROVIDERS / "expected.json").read_text()) if PROVIDERS.exists() else {}
CASES = {c["case"]: c for c in EXPECTED.get("cases", []) if c["provider"] == "anthropic"}
MODELS = sorted({c["model"] for c in CASES.values()})
SEED = int(os.environ.get("RESPSTREAM_SEED", "3911"))


def body_of(case: dict[str, Any]) -> bytes:
    return (PROVIDERS / case["file"]).read_bytes()


@pytest.fixture(scope="module")
def provider() -> Iterator[SimulatedAnthropic]:
    if not CASES:
        pytest.skip(f"no recordings at {PROVIDERS}")
    print(f"SIMULATED Anthropic provider chunking seed: {SEED}")
    with SimulatedAnthropic(MODELS, seed=SEED) as sim:
        yield sim


@pytest.fixture(scope="module")
def gateway(provider: SimulatedAnthropic) -> Iterator[ServerThread]:
    config = Config(
        dialect="openai",
        upstreams=[f"anthropic+{provider.url}"],
        upstream_options={"retries": 0, "idle_timeout": 5.0, "api_key": "sk-ant-test-key"},
        tools={"enabled": []},  # the recordings' calls are the client's: the response ends with them
        rewrite={"steps": []},  # the answer as the upstream gave it
    )
    with ServerThread(create_app(config)) as server:
        yield server


@pytest.fixture(scope="module", params=["openai", "platform", "openresponses"])
def default_gateway(request: pytest.FixtureRequest, provider: SimulatedAnthropic) -> Iterator[tuple[str, ServerThread]]:
    """The gateway as ``respstream serve --upstream anthropic+http://…`` runs it (default tools and rewrite), in each
    dialect."""
    config = Config(dialect=request.param, upstreams=[f"anthropic+{provider.url}"],
                    upstream_options={"api_key": "sk-ant-test-key", "retry_backoff": 0.01})
    with ServerThread(create_app(config)) as server:
        yield request.param, server


@pytest.fixture
def sim(provider: SimulatedAnthropic) -> SimulatedAnthropic:
    provider.reset()
    return provider


def post(server: ServerThread, body: dict[str, Any], dialect: str = "openai", timeout: float = 30
         ) -> tuple[dict[str, Any], list[Any], httpx.Response]:
    """Stream one response; its assembled result (``respstream replay --json``'s shape) and violations."""
    with httpx.Client(timeout=timeout) as client:
        response = client.post(f"{server.base_url}/responses", json={"stream": True, **body})
    if response.status_code != 200:
        return {}, [], response
    core = StreamCore(dialect=dialect if dialect != "openresponses" else None)
    core.feed(response.content)
    core.close()
    return core.result.to_json(), [v.to_json() for v in core.violations], response


# -- the real large model behind anthropic+embedded (tests marked model + slow) ----------------------------------------

LARGE_MODEL_TIMEOUT = 300.0  # (the 1.5B model reads a prompt at ~20-100 tokens/s on 2 cores)


@pytest.fixture(scope="module")
def large_gateway() -> Iterator[tuple[ServerThread, str]]:
    """The gateway in front of ``anthropic+embedded:large`` (llama.cpp's own ``/v1/messages``, no simulated part) and
    the model's id."""
    if not EmbeddedUpstream.available("large"):
        pytest.skip("the large embedded model is not installed (make install-model)")
    config = Config(dialect="openai", upstreams=["anthropic+embedded:large"], tools={"enabled": []},
                    rewrite={"steps": []}, upstream_options={"n_parallel": 1})
    with ServerThread(create_app(config), start_timeout=180) as server:
        models = [m["id"] for m in httpx.get(f"{server.base_url}/models", timeout=10).json()["data"]
                  if m["id"] != "auto"]
        yield server, models[0]


@pytest.fixture
def llama_wire(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """What went to llama.cpp and what came back, as sent: the request bodies (``bodies``), the content blocks its
    streams started (``blocks``) and its raw stream bytes (``raw``)."""
    seen: dict[str, list[Any]] = {"bodies": [], "blocks": [], "raw": []}
    build, start, feed = AnthropicUpstream.body, AnthropicStream._start, AnthropicBody.feed

    def body(self: AnthropicUpstream, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = build(self, *args, **kwargs)
        seen["bodies"].append(out)
        return out

    def started(self: AnthropicStream, data: dict[str, Any]) -> Any:
        seen["blocks"].append(data.get("content_block"))
        return start(self, data)

    def fed(self: AnthropicBody, raw: bytes) -> Any:
        seen["raw"].append(bytes(raw))
        return feed(self, raw)

    monkeypatch.setattr(AnthropicUpstream, "body", body)
    monkeypatch.setattr(AnthropicStream, "_start", started)
    monkeypatch.setattr(AnthropicBody, "feed", fed)
    return seen


def answer_tool_result(server: ServerThread, model: str, question: dict[str, Any], call: dict[str, Any],
                       tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The second turn of a tool round trip on the large model: ``call`` (a ``function_call`` output item) and its
    output go back after ``question``; asserts the stream is clean and the model answered in text, and returns the
    result (what llama.cpp was sent is in the caller's ``llama_wire``). Temperature 0: at the default 0.8 the 1.5B
    model now and then answers the tool result with nothing."""
    history = [question, {"type": "function_call", "call_id": call["call_id"], "name": call["name"],
                          "arguments": call["arguments"]},
               {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny, 21 C"}]
    got, violations, response = post(server, {"model": model, "input": history, "tools": tools,
                                              "max_output_tokens": 48, "store": False, "temperature": 0},
                                      timeout=LARGE_MODEL_TIMEOUT)
    assert response.status_code == 200, response.text
    assert violations == [] and got["status"] in ("completed", "incomplete"), got["error"]
    assert got["output_text"].strip(), got["output"]
    return got
