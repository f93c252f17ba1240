"""Router: the pure classification table, model choice per category, circuit breaker and fallback."""

from __future__ import annotations

import pytest

from respstream.server.routing.router import (
    CircuitBreaker,
    ModelNotFound,
    RouteDecision,
    Router,
    RoutingRules,
    classify,
)
from respstream.server.upstream.base import UpstreamError
from respstream.server.upstream.scripted import ScriptedUpstream

LONG = "word " * 600

TABLE = [
    ("Hi there", "fast", "Short input"),
    ("What is the capital of France?", "fast", "Short input"),
    ("Summarise https://example.com/post for me", "retrieval", "URL"),
    ("see www.example.org/page", "retrieval", "URL"),
    ("What is the latest news about the EU AI Act?", "retrieval", "fresh facts"),
    ("Who won the match today?", "retrieval", "'who won'"),
    ("What happened in 2025 in Dutch politics?", "retrieval", "recent year (2025)"),
    ("Waarom is de lucht blauw?", "reasoning", "'waarom'"),
    ("Explain step by step why the sky is blue", "reasoning", "reasoning"),
    ("Prove that the square root of 2 is irrational", "reasoning", "'prove'"),
    ("12 * 7 + 3", "reasoning", "arithmetic"),
    ("Is it red? Or blue?", "reasoning", "Several questions"),
    (LONG, "reasoning", "Input length > 500 tokens"),
    ("def f(x):\n    return x", "code", "programming"),
    ("Fix this Python traceback please", "code", "programming"),
]


@pytest.mark.parametrize(("text", "category", "reason_part"), TABLE, ids=[t[0][:30] for t in TABLE])
def test_classification_table(text: str, category: str, reason_part: str) -> None:
    got, reasoning = classify(text)
    assert got == category
    assert reason_part in reasoning


def test_code_without_code_model_is_reasoning() -> None:
    category, reasoning = classify("write a python function", code_enabled=False)
    assert category == "reasoning" and "no code model" in reasoning


def test_rules_from_mapping() -> None:
    rules = RoutingRules.from_mapping({"long_input_tokens": 10, "retrieval_keywords": ["Beurs"]})
    assert classify("one two three four five six seven eight nine ten eleven", rules)[0] == "reasoning"
    assert classify("hoe staat de beurs", rules) == ("retrieval", "Asks for fresh facts ('beurs')")
    with pytest.raises(ValueError, match=r"unknown router\.rules"):
        RoutingRules.from_mapping({"typo": 1})
    with pytest.raises(ValueError, match="positive integer"):
        RoutingRules.from_mapping({"long_input_tokens": "many"})


def up(name: str, *models: str) -> ScriptedUpstream:
    return ScriptedUpstream(1, name=name, models=list(models))


async def test_default_maps_every_category_to_first_model() -> None:
    router = Router([up("a", "m1"), up("b", "m2")])
    assert router.models() == ["m1", "m2"]
    for text in ("hi", LONG, "news today"):
        decision = await router.route(text, None)
        assert (decision.model_id, decision.upstream.name, decision.source) == ("m1", "a", "router")
    assert (await router.route("news today", "auto")).category == "retrieval"


async def test_categories_from_config_mapping() -> None:
    config = {"categories": {"reasoning": ["big"], "fast": ["small"]}, "failure_threshold": 2}
    router = Router([up("s", "small"), up("b", "big")], config)
    assert (await router.route(LONG, None)).model_id == "big"
    assert (await router.route("hi", None)).model_id == "small"
    # retrieval not configured: first available model
    assert (await router.route("latest news", None)).model_id == "small"
    with pytest.raises(ValueError, match="unknown router config"):
        Router([up("s", "small")], {"categories": {}, "bogus": 1})


async def test_pinned_model() -> None:
    router = Router([up("a", "m1"), up("b", "m2")])
    decision = await router.route("hi", "m2")
    assert (decision.model_id, decision.upstream.name, decision.category) == ("m2", "b", "pinned")
    with pytest.raises(ModelNotFound) as info:
        await router.route("hi", "gpt-17")
    assert info.value.available == ["m1", "m2"] and "gpt-17" in str(info.value)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_circuit_breaker_states() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=2, open_seconds=10, clock=clock)
    breaker.failure("upstream_timeout")
    assert breaker.state == "closed" and breaker.available()
    breaker.failure("upstream_timeout")
    assert breaker.state == "open" and not breaker.available()
    clock.now += 10
    assert breaker.state == "half_open" and breaker.available()
    breaker.begin()
    assert not breaker.available(), "only one half-open probe at a time"
    breaker.failure("upstream_error")
    assert breaker.state == "open"
    clock.now += 10
    breaker.begin()
    breaker.success()
    assert breaker.state == "closed" and breaker.failures == 0 and breaker.available()
    # A probe that never reports back does not block the upstream forever.
    breaker.failure("x")
    breaker.failure("x")
    clock.now += 10
    breaker.begin()
    clock.now += 10
    assert breaker.available()


async def test_router_avoids_open_upstream_and_probes_later() -> None:
    clock = Clock()
    a, b = up("a", "m"), up("b", "m")
    router = Router([a, b], failure_threshold=2, open_seconds=30, clock=clock)
    error = UpstreamError("upstream_timeout", "slow")
    router.record_failure(a, error)
    # One failure: not open yet, but a clean upstream serving the same model is preferred.
    assert (await router.route("hi", None)).upstream is b
    router.record_failure(a, error)
    assert router.health()["a"]["state"] == "open"
    assert (await router.route("hi", None)).upstream is b
    router.record_failure(b, error)
    router.record_failure(b, error)
    decision = await router.route("hi", None)
    assert "unhealthy" in decision.reasoning  # both open: try anyway
    clock.now += 30
    probe = await router.route("hi", None)
    assert probe.upstream is a and router.breaker(a).state == "half_open"
    router.record_success(a)
    assert router.health()["a"] == {"state": "closed", "consecutive_failures": 0, "last_error": None}


async def test_client_errors_do_not_count_against_health() -> None:
    a = up("a", "m")
    router = Router([a], failure_threshold=1)
    router.record_failure(a, UpstreamError("upstream_error", "bad request", status=400))
    assert router.health()["a"]["state"] == "closed"
    router.record_failure(a, UpstreamError("rate_limited", "429", status=429))
    assert router.health()["a"]["state"] == "open"


async def test_fallback_same_category_then_none() -> None:
    a, b, c = up("a", "big"), up("b", "big"), up("c", "small")
    router = Router([a, b, c], {"reasoning": ["big", "small"]})
    first = await router.route(LONG, None)
    assert (first.upstream, first.category) == (a, "reasoning")
    error = UpstreamError("upstream_unavailable", "refused")
    router.record_failure(a, error)
    second = router.fallback(first, error)
    assert isinstance(second, RouteDecision)
    assert (second.upstream, second.model_id, second.source, second.category) == (b, "big", "fallback", "reasoning")
    assert "a failed (upstream_unavailable)" in second.reasoning
    third = router.fallback(second, error)
    assert third is not None and (third.upstream, third.model_id) == (c, "small")
    assert router.fallback(third, error) is None
    late = UpstreamError("upstream_error", "reset", before_first_token=False)
    assert router.fallback(first, late) is None, "never fail over once the client saw output"


async def test_pinned_fallback_stays_on_model() -> None:
    a, b, c = up("a", "m"), up("b", "m"), up("c", "other")
    router = Router([a, b, c])
    decision = await router.route("hi", "m")
    nxt = router.fallback(decision, UpstreamError("upstream_timeout", "t"))
    assert nxt is not None and nxt.upstream is b and nxt.model_id == "m"
    assert router.fallback(nxt, UpstreamError("upstream_timeout", "t")) is None
