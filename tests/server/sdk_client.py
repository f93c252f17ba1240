"""The ``sdk`` fixture of the server tests that drive the gateway with the official OpenAI SDK: a client on the
module's ``srv`` gateway (each module defines ``srv``), without retries (a failure shows as it happened)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI

from .helpers import ServerThread

__all__ = ["sdk"]


@pytest.fixture
def sdk(srv: ServerThread) -> Iterator[OpenAI]:
    client = OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=20)
    yield client
    client.close()
