"""Anthropic upstream failures through the real gateway: 401/403 -> a clear upstream-auth error (the key never
echoed), a prompt too long -> context_length_exceeded, 429 with ``retry-after`` and 529 overloaded (also as an
``error`` event before any output) -> bounded retries, then failover to the route's next upstream (another Anthropic
upstream, or another kind), with ``response.routing.completed`` naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .conftest import CASES, MODELS, body_of, post
from .made_streams import text_stream
from .simulated_anthropic import Reply, SimulatedAnthropic

KEY = "sk-ant-secret-never-echoed"
OVERLOADED = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()


@contextmanager
def gateway_for(*upstreams: str, retries: int = 1) -> Iterator[ServerThread]:
    config = Config(dialect="openai", upstreams=list(upstreams), tools={"enabled": []}, rewrite={"steps": []},
                    upstream_options={"retries": retries, "retry_backoff": 0.01, "api_key": KEY,
                                      "idle_timeout": 5.0})
    with ServerThread(create_app(config)) as server:
        yield server


def routing_events(response: httpx.Response) -> list[dict[str, Any]]:
    found = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and 'response.routing.completed"' in line:  # (respstream: prefixed in openai)
            found.append(json.loads(line[6:]))
    return found


def test_401_and_403_are_a_clear_upstream_auth_error() -> None:
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}") as gateway:
        for status in (401, 403):
            sim.reset()
            sim.replies.append(Reply(json.dumps({"type": "error", "error": {
                "type": "authentication_error", "message": "invalid x-api-key"}}).encode(), status=status,
                content_type="application/json"))
            got, violations, response = post(gateway, {"model": MODELS[0], "input": "hi"})
            assert violations == [] and got["status"] == "failed"
            assert got["error"]["code"] == "upstream_auth"
            assert "ANTHROPIC_API_KEY" in got["error"]["message"] and f"HTTP {status}" in got["error"]["message"]
            assert KEY not in response.text
            assert len(sim.requests) == 1  # a refused key is not retried


def test_prompt_too_long_is_context_length_exceeded() -> None:
    case = CASES["ruby_llm__http400-prompt-too-long.json"]
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}") as gateway:
        sim.replies.append(Reply(body_of(case), status=400, content_type="application/json"))
        got, violations, _ = post(gateway, {"model": case["model"], "input": "Hi"})
        assert violations == [] and got["status"] == "failed"
        assert got["error"]["code"] == "context_length_exceeded"
        assert "invalid_request_error" in got["error"]["message"] and len(sim.requests) == 1


def test_429_waits_its_retry_after_then_succeeds() -> None:
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}") as gateway:
        sim.replies.extend([Reply(b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
                                  status=429, content_type="application/json", headers={"retry-after": "0.2"}),
                            Reply(text_stream("after the wait"))])
        got, violations, _ = post(gateway, {"model": MODELS[0], "input": "hi"})
        assert violations == [] and got["status"] == "completed" and got["output_text"] == "after the wait"
        assert len(sim.requests) == 2


def test_429_asking_too_long_a_wait_is_not_waited() -> None:
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}") as gateway:
        sim.replies.extend([Reply(b'{"type":"error","error":{"type":"rate_limit_error","message":"later"}}',
                                  status=429, content_type="application/json", headers={"retry-after": "3600"}),
                            Reply(text_stream("unused"))])
        got, _, _ = post(gateway, {"model": MODELS[0], "input": "hi"})
        assert got["status"] == "failed" and got["error"]["code"] == "rate_limited" and len(sim.requests) == 1


def test_overloaded_is_retried_boundedly_then_fails_over_to_the_next_anthropic_upstream() -> None:
    with SimulatedAnthropic(MODELS) as first, SimulatedAnthropic(MODELS) as second, \
            gateway_for(f"anthropic+{first.url}", f"anthropic+{second.url}", retries=1) as gateway:
        first.replies.extend([Reply(OVERLOADED, status=529, content_type="application/json"),
                              Reply(body_of(CASES["doc__anthropic-docs__error-overloaded.sse"]))])  # (as an event)
        second.replies.append(Reply(text_stream("from the second")))
        got, violations, response = post(gateway, {"model": "auto", "input": "hi"})
        assert violations == [] and got["status"] == "completed" and got["output_text"] == "from the second"
        assert len(first.requests) == 2 and len(second.requests) == 1  # one retry, then the next upstream
        routed = routing_events(response)
        assert [r["source"] for r in routed] == ["router", "fallback"]
        assert first.url.split("//")[1] in routed[-1]["reasoning"] and "upstream_error" in routed[-1]["reasoning"]
        assert second.url.split("//")[1] in routed[-1]["reasoning"]


def test_failover_to_another_kind_of_upstream() -> None:
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}", "scripted:3", retries=0) as gateway:
        sim.replies.append(Reply(OVERLOADED, status=529, content_type="application/json"))
        got, violations, response = post(gateway, {"model": "auto", "input": "hi"})
        assert violations == [] and got["status"] == "completed" and got["output_text"]
        routed = routing_events(response)
        assert routed[-1]["source"] == "fallback" and routed[-1]["model_id"] == "scripted"


def test_models_come_from_the_provider_and_are_listed_with_it() -> None:
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}") as gateway:
        listed = httpx.get(f"{gateway.base_url}/models", timeout=10).json()["data"]
        mine = {m["id"]: m for m in listed if m.get("provider") == "anthropic"}
        assert sorted(mine) == MODELS
        assert set(mine[MODELS[0]]["input_modalities"]) == {"text", "image", "file"}
        assert sim.model_queries[0] == "limit=1000"  # (the API pages its list: one page of the largest size)
        assert sim.requests == []


def test_an_error_event_after_output_is_not_retried() -> None:
    case = CASES["doc__spliced__text-then-overloaded.sse"]
    with SimulatedAnthropic(MODELS) as sim, gateway_for(f"anthropic+{sim.url}", retries=2) as gateway:
        sim.replies.extend([Reply(body_of(case)), Reply(text_stream("must not be used"))])
        got, violations, _ = post(gateway, {"model": case["model"], "input": "hi"})
        assert violations == [] and got["status"] == "failed" and "overloaded_error" in got["error"]["message"]
        assert len(sim.requests) == 1
