from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.chat_server import FakeChatCompletionsServer


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer() as server:
        yield server


@pytest.fixture
def fake(fake_server: FakeChatCompletionsServer) -> FakeChatCompletionsServer:
    fake_server.reset()
    return fake_server


@pytest.fixture(scope="module")
def responses_server() -> Iterator[FakeChatCompletionsServer]:
    """A SIMULATED Responses API server (``/v1/responses``), one per module."""
    with FakeChatCompletionsServer(route="/v1/responses") as server:
        yield server
