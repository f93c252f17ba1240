"""Our gateway on loopback for the interop tests: the real app, the SIMULATED scripted upstream (no model).

``text_gateway`` answers every request with scripted text (both dialects); ``tool_gateway`` makes the scripted
upstream call the client function tool ``get_weather`` whenever the last message is not a tool result (then it
answers in text), so a tool round trip happens on every run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .gateways import TEXT_UPSTREAM, TOOL_UPSTREAM, Gateway, serve


@pytest.fixture(scope="module", params=["platform", "openai"])
def text_gateway(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, TEXT_UPSTREAM)


@pytest.fixture(scope="module", params=["platform", "openai"])
def tool_gateway(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, TOOL_UPSTREAM)


@pytest.fixture(scope="module")
def tool_gateway_openai() -> Iterator[Gateway]:
    yield from serve("openai", TOOL_UPSTREAM)
