"""Upstream faults over real HTTP: stall, reset, malformed chunks, 5xx/429 before the first token (failover).

Every stream the gateway emitted is run through ``StreamCore`` and must have zero protocol violations, whatever the
upstream did: a fault changes how a stream ends, never whether it is well-formed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.chat_server import Done, Drop, FakeChatCompletionsServer, Raw, Stall, Status, finish, text
from faults.helpers import GatewayThread, chat_upstream, gateway_app, stream_post


@pytest.fixture
def fake() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer(models=["model-a"]) as server:
        yield server


@pytest.fixture
def fake_b() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer(models=["model-b"]) as server:
        yield server


@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_stall_mid_stream_ends_with_upstream_timeout_within_idle_timeout(
    fake: FakeChatCompletionsServer, dialect: str
) -> None:
    fake.script(text("Hello"), text(" there"), Stall())
    idle = 0.5
    app = gateway_app([chat_upstream(fake.url, "a", "model-a", idle_timeout=idle)], dialect=dialect)
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"}, dialect=dialect)
    assert got.status_code == 200
    assert got.core.violations == []
    assert got.core.result.status in ("error", "failed")
    assert got.error_code == "upstream_timeout"
    assert got.core.result.streamed_text == "Hello there"
    # Not before the idle timeout; after it, only a bound far below anything else that could end the stall (the
    # 600 s deadline, the client's 15 s), so a busy machine's delays fit.
    assert idle <= got.seconds < idle + 10.0, f"terminal after {got.seconds:.2f} s, idle timeout {idle} s"
    assert fake.wait_finished(1, timeout=5), "the stalled upstream connection was not closed"
    assert fake.client_disconnects == 1


def test_reset_mid_stream_ends_with_terminal_error_without_hanging(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("Partial"), text(" answer"), Drop())
    app = gateway_app([chat_upstream(fake.url, "a", "model-a", idle_timeout=60)])
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"})
    assert got.core.violations == []
    assert got.core.result.status == "error"
    assert got.error_code == "upstream_error"
    assert got.core.result.streamed_text == "Partial answer"
    assert got.seconds < 12, "a reset upstream must end the stream at once, not after the 60 s idle timeout"


@pytest.mark.parametrize(
    "bad",
    [
        Raw(b"data: {not json\n\n"),
        Raw(b'data: ["a list, not an object"]\n\n'),
        Raw(b'data: {"choices": "nope"}\n\n'),
        Raw(b"event: error\ndata: {\"error\": {\"message\": \"boom\"}}\n\n"),
    ],
    ids=["invalid-json", "json-array", "choices-not-list", "error-event"],
)
def test_malformed_chunk_ends_with_upstream_error(fake: FakeChatCompletionsServer, bad: Raw) -> None:
    fake.script(text("Fine"), bad, text(" never shown"), finish(), Done())
    app = gateway_app([chat_upstream(fake.url, "a", "model-a", idle_timeout=10)])
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"})
    assert got.core.violations == []
    assert got.core.result.status == "error"
    assert got.error_code == "upstream_error"
    assert got.core.result.streamed_text == "Fine"


def test_malformed_first_chunk_with_one_upstream_is_a_terminal_error(fake: FakeChatCompletionsServer) -> None:
    fake.script(Raw(b"data: {oops\n\n"))
    app = gateway_app([chat_upstream(fake.url, "a", "model-a", idle_timeout=10)])
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"})
    assert got.core.violations == []
    assert got.error_code == "upstream_error"
    assert got.core.result.streamed_text == ""


@pytest.mark.parametrize(
    "failure",
    [Status(503, {"error": {"message": "overloaded"}}), Status(500), Status(429, headers={"Retry-After": "7"})],
    ids=["503", "500", "429"],
)
@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_failure_before_first_token_fails_over_to_the_second_upstream(
    fake: FakeChatCompletionsServer, fake_b: FakeChatCompletionsServer, failure: Status, dialect: str
) -> None:
    fake.script(failure)
    fake_b.script(text("From"), text(" B"), finish(), Done())
    app = gateway_app([chat_upstream(fake.url, "a", "model-a"), chat_upstream(fake_b.url, "b", "model-b")],
                      dialect=dialect)
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"}, dialect=dialect)
    assert got.core.violations == []
    assert got.core.result.status == "completed"
    assert got.core.result.output_text == "From B"
    routing = [p for p in got.payloads() if p["type"].endswith("response.routing.completed")]
    assert [(r["model_id"], r["source"]) for r in routing] == [("model-a", "router"), ("model-b", "fallback")]
    assert len(fake.requests) == 1 and len(fake_b.requests) == 1


def test_failure_after_first_token_does_not_fail_over(
    fake: FakeChatCompletionsServer, fake_b: FakeChatCompletionsServer
) -> None:
    fake.script(text("Half"), Drop())
    app = gateway_app([chat_upstream(fake.url, "a", "model-a"), chat_upstream(fake_b.url, "b", "model-b")])
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"})
    assert got.core.violations == []
    assert got.error_code == "upstream_error"
    assert got.core.result.streamed_text == "Half"
    assert fake_b.requests == [], "text was already shown: a second upstream must not start over"


@pytest.fixture
def fake_c() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer(models=["model-c"]) as server:
        yield server


@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_pinned_model_fails_over_to_another_upstream_of_that_model_without_routing_events(
    fake: FakeChatCompletionsServer, dialect: str
) -> None:
    with FakeChatCompletionsServer(models=["model-a"]) as twin, FakeChatCompletionsServer(models=["model-b"]) as other:
        fake.script(Status(503))
        twin.script(text("From"), text(" twin"), finish(), Done())
        app = gateway_app([chat_upstream(fake.url, "a1", "model-a"), chat_upstream(other.url, "b", "model-b"),
                           chat_upstream(twin.url, "a2", "model-a")], dialect=dialect)
        with GatewayThread(app) as gw:
            got = stream_post(gw.url, {"input": "hi", "model": "model-a"}, dialect=dialect)
        assert other.requests == [], "a pinned model must never fall back to a different model"
        assert len(fake.requests) == 1 and len(twin.requests) == 1
    assert got.core.violations == []
    assert got.core.result.output_text == "From twin"
    assert [p for p in got.payloads() if p["type"].endswith("response.routing.completed")] == []


def test_fallback_follows_the_category_model_list_and_tries_each_upstream_once(
    fake: FakeChatCompletionsServer, fake_b: FakeChatCompletionsServer, fake_c: FakeChatCompletionsServer
) -> None:
    for server in (fake, fake_b, fake_c):
        server.script(Status(503))
    upstreams = [chat_upstream(fake.url, "a", "model-a"), chat_upstream(fake_b.url, "b", "model-b"),
                 chat_upstream(fake_c.url, "c", "model-c")]
    # "hi" is a `fast` input: its list says model-a, then model-c, before the rest (model-b) in upstream order.
    app = gateway_app(upstreams, router={"categories": {"fast": ["model-a", "model-c"]}})
    with GatewayThread(app) as gw:
        got = stream_post(gw.url, {"input": "hi"})
    assert got.core.violations == []
    assert got.error_code == "upstream_error"
    routing = [p for p in got.payloads() if p["type"].endswith("response.routing.completed")]
    assert [(r["model_id"], r["source"], r["category"]) for r in routing] == [
        ("model-a", "router", "fast"), ("model-c", "fallback", "fast"), ("model-b", "fallback", "fast")]
    assert [len(s.requests) for s in (fake, fake_b, fake_c)] == [1, 1, 1], "each upstream is tried exactly once"
