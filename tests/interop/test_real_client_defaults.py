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

from respstream.protocol.stream import StreamCore

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
    core = StreamCore(dialect="platform")  # our own checker: still a conformant platform stream
    core.feed(raw.encode())
    core.close()
    assert core.violations == [] and core.result.status == "error"


def test_stream_absent_with_accept_any_is_json(plain: Gateway) -> None:
    r = httpx.post(f"{plain.base_url}/responses", json={"input": "Hi."}, headers={"accept": "*/*"}, timeout=20)
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["status"] == "completed" and r.json()["output_text"]


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def busy(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, "scripted:3?delay_ms=1&reasoning=2&tool=calculator,web_search")


def test_everything_the_gateway_produced_goes_back_as_input(busy: Gateway) -> None:
    """``store: false`` clients (Codex) send the whole output back each turn: reasoning (asked for with
    ``include: ["reasoning.encrypted_content"]``), server tool items of every dialect, messages. Never a 400."""
    calculator = "respstream:calculator" if busy.dialect == "openresponses" else "calculator"
    first = httpx.post(f"{busy.base_url}/responses", timeout=30, json={
        "input": "What is 2+2? Search it too.", "store": False, "include": ["reasoning.encrypted_content"],
        "tools": [{"type": calculator}, {"type": "web_search"}]}).json()
    kinds = [item["type"] for item in first["output"]]
    assert "reasoning" in kinds and len(kinds) >= 4, kinds
    history = [{"role": "user", "content": "What is 2+2?"}, *first["output"], {"role": "user", "content": "Thanks."}]
    again = httpx.post(f"{busy.base_url}/responses", json={"input": history, "store": False}, timeout=30)
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "completed"
