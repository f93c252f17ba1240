from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.server_thread import ServerThread
from providers.gemini.simulated_gemini import SimulatedGemini
from respstream.server.config import Config
from respstream.server.http.app import create_app

# The recorded provider streams and their expected outcomes (a copy of the shared corpus, with its attribution:
# tests/data/providers/README.md).
PROVIDERS = Path(__file__).resolve().parents[2] / "data" / "providers"
EXPECTED = json.loads((PROVIDERS / "expected.json").read_text())
CASES: list[dict[str, Any]] = [c for c in EXPECTED["cases"] if c["provider"] == "gemini"]
MODELS = sorted({c["model"] for c in CASES} | {"gemini-2.5-flash", "gemini-tiny"})
LIMITS = {"gemini-tiny": (1000, 100)}  # (a small context, listed by the SIMULATED API's GET /v1beta/models)
API_KEY = "test-gemini-key-not-a-secret"


@pytest.fixture(scope="module")
def simulated() -> Iterator[tuple[SimulatedGemini, ServerThread]]:
    """The SIMULATED Gemini API, one per module."""
    fake = SimulatedGemini(api_key=API_KEY, models=MODELS, seed=39, limits=LIMITS)
    with ServerThread(fake) as server:
        yield fake, server


@pytest.fixture
def fake(simulated: tuple[SimulatedGemini, ServerThread]) -> SimulatedGemini:
    fake = simulated[0]
    fake.replies.clear()
    fake.requests.clear()
    fake.invalid.clear()
    return fake


@pytest.fixture(scope="module")
def gateway(simulated: tuple[SimulatedGemini, ServerThread]) -> Iterator[ServerThread]:
    """The real gateway (openai dialect) in front of the SIMULATED Gemini API; models discovered from it."""
    config = Config(
        dialect="openai",
        upstreams=[f"gemini+{simulated[1].url}"],
        upstream_options={"api_key": API_KEY, "retries": 0, "idle_timeout": 10.0},
        tools={"enabled": []},
        rewrite={"steps": []},
    )
    with ServerThread(create_app(config)) as server:
        yield server
