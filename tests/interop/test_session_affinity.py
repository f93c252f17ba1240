"""Session affinity (issue #29): with several upstreams serving the model, the turns of one session (``session-id`` /
``thread-id`` headers or ``prompt_cache_key``) go to the same upstream, and different sessions spread over them.
The official ``openai`` SDK against our gateway over loopback; two SIMULATED scripted upstreams that say who they are.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI

from conformance.live_servers import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

UPSTREAMS = ["scripted:0?text=alpha", "scripted:0?text=bravo", "scripted:0?text=charlie"]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with ServerThread(create_app(Config(dialect="openai", upstreams=UPSTREAMS))) as server:
        yield server.base_url


def _served_by(base_url: str, *, headers: dict[str, str] | None = None, cache_key: str | None = None) -> str:
    with OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=20, default_headers=headers or {}) as c:
        extra = {"prompt_cache_key": cache_key} if cache_key else {}
        return c.responses.create(model="scripted", input="Hi.", store=False, **extra).output_text


@pytest.mark.parametrize("header", ["session-id", "thread-id", "session_id"])
def test_one_session_sticks_to_one_upstream(base_url: str, header: str) -> None:
    served = {_served_by(base_url, headers={header: "sess-42"}) for _ in range(4)}
    assert len(served) == 1


def test_sessions_spread_over_the_upstreams(base_url: str) -> None:
    by_header = {_served_by(base_url, headers={"session-id": f"session-{i}"}) for i in range(24)}
    by_key = {_served_by(base_url, cache_key=f"key-{i}") for i in range(24)}
    assert by_header == by_key == {"alpha", "bravo", "charlie"}
    assert len({_served_by(base_url, cache_key="key-7") for _ in range(3)}) == 1
