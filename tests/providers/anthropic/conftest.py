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


def post(server: ServerThread, body: dict[str, Any], dialect: str = "openai"
         ) -> tuple[dict[str, Any], list[Any], httpx.Response]:
    """Stream one response; its assembled result (``respstream replay --json``'s shape) and violations."""
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server.base_url}/responses", json={"stream": True, **body})
    if response.status_code != 200:
        return {}, [], response
    core = StreamCore(dialect=dialect if dialect != "openresponses" else None)
    core.feed(response.content)
    core.close()
    return core.result.to_json(), [v.to_json() for v in core.violations], response
