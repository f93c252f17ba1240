"""What real clients assume about defaults and failures, checked with the official ``openai`` SDK and plain httpx on
our gateway over loopback (SIMULATED scripted upstream), in all three dialects (issue #29).

- A failed response must make the SDK raise while it iterates the stream (openai-python's ``Stream`` raises when an
  event's data carries ``error``): in ``platform`` the seed's flat ``error`` terminal also carries the nested copy.
- ``stream`` absent with ``Accept: */*`` (Vercel AI SDK ``generateObject``, litellm) is JSON in every dialect.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from .gateways import Gateway, serve


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def failing(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, "scripted:6?delay_ms=1&fail_at=2")


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def plain(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, "scripted:6?delay_ms=1")


def test_a_failed_stream_raises_in_the_sdk(failing: Gateway) -> None:
    seen: list[Any] = []
    with OpenAI(base_url=failing.base_url, api_key="k", max_retries=0, timeout=20) as client:
        stream = client.responses.create(model="auto", input="Hi.", stream=True)
        with pytest.raises(openai.APIError) as caught:
            seen.extend(stream)
    assert seen and seen[0].type == "response.created"  # the events before the failure still came through
    assert "upstream" in caught.value.message.lower() or caught.value.code == "upstream_error"


def test_platform_error_terminal_stays_seed_shaped(failing: Gateway) -> None:
    if failing.dialect != "platform":
        pytest.skip("the seed's flat error terminal is the platform dialect's")
    raw = httpx.post(f"{failing.base_url}/responses", json={"input": "Hi.", "stream": True}, timeout=20).text
    last = json.loads(raw.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert last["type"] == "error" and last["code"] == "upstream_error" and last["message"]  # the seed's fields
    assert last["error"]["code"] == "upstream_error" and last["error"]["message"] == last["message"]
    assert "event: message" in raw


def test_stream_absent_with_accept_any_is_json(plain: Gateway) -> None:
    r = httpx.post(f"{plain.base_url}/responses", json={"input": "Hi."}, headers={"accept": "*/*"}, timeout=20)
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["status"] == "completed" and r.json()["output_text"]
