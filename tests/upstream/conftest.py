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
