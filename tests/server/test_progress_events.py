"""A response that stays quiet (a model still reading a long prompt) gets real ``keepalive`` events, not only SSE
comments: Codex CLI's idle timer counts events (issue #29). A real gateway over loopback with a SIMULATED scripted
upstream whose first token comes late; every dialect; the stream stays conformant and the official SDK reads it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from openai import OpenAI

from respstream.server.events.dialects import DIALECTS
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app, post_stream

SLOW = {"scripted-a": ScriptedUpstream(2, name="a", models=["scripted-a"], delay_ms=900)}


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    with ServerThread(make_app(dialect=request.param, upstreams=SLOW, progress_event_seconds=0.25)) as srv:
        yield srv.url, request.param


def test_quiet_response_gets_keepalive_events(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "x", "model": "scripted-a"}, dialect=dialect)
    beats = [i for i, kind in enumerate(got.types) if "keepalive" in kind]
    if dialect == "openresponses":
        # Not within 240 s of quiet: spec-typed clients (the public compliance suite's zod schema) refuse unknown
        # event types, and give up long before that (below: after it).
        assert beats == []
    else:
        assert len(beats) >= 4  # ~1.8 s of silence before and between the two deltas, one every 0.25 s
        assert got.types[0] == "response.created" and beats[0] > 0
    assert got.core.violations == [] and got.core.result.status == "completed"
    assert got.core.result.output_text == "The quick"


def test_the_sdk_reads_through_keepalive_events(server: tuple[str, str]) -> None:
    url, dialect = server
    with OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=20) as client:
        events = list(client.responses.create(model="scripted-a", input="x", stream=True))
    assert events[-1].type == "response.completed"
    assert any("keepalive" in str(e.type) for e in events) == (dialect != "openresponses")


def test_openresponses_sends_its_extension_event_after_its_longer_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """In Open Responses the event is ``respstream:keepalive`` (spec: a prefixed extension event), after at least
    ``keepalive_after_seconds`` of quiet (240 s; 0.6 s here, over the 0.25 s interval)."""
    spec = dataclasses.replace(DIALECTS["openresponses"], keepalive_after_seconds=0.6)
    monkeypatch.setitem(DIALECTS, "openresponses", spec)
    with ServerThread(make_app(dialect="openresponses", upstreams=SLOW, progress_event_seconds=0.25)) as srv:
        got = post_stream(srv.url, {"input": "x", "model": "scripted-a"}, dialect="openresponses")
    beats = [kind for kind in got.types if "keepalive" in kind]
    assert beats and set(beats) == {"respstream:keepalive"}
    assert len(beats) <= 3  # ~1.8 s of silence, one every 0.6 s at most (0.25 s would give 4 or more)
    assert got.core.violations == [] and got.core.result.output_text == "The quick"


def test_off_when_zero() -> None:
    with ServerThread(make_app(upstreams=SLOW, progress_event_seconds=0)) as srv:
        got = post_stream(srv.url, {"input": "x", "model": "scripted-a"}, dialect="platform")
    assert "keepalive" not in got.types and got.core.result.status == "completed"


def test_the_sdk_stream_helper_reads_through_keepalive_events(server: tuple[str, str]) -> None:
    url, _ = server
    with OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=20) as client, \
            client.responses.stream(model="scripted-a", input="x") as stream:
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text == "The quick"
