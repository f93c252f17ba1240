"""Gemini's failures through the gateway: a refused key is a clear upstream-auth error, 429 (with Retry-After or
RetryInfo) and 503 are retried a bounded number of times, an error inside the stream fails the response with its
status, and the key is never logged nor echoed."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from providers.gemini.conftest import API_KEY, CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini, sse_body
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.factory import build_upstream

TEXT = next(c for c in CASES if c["case"] == "pydantic-ai__text-3-chunks.sse") if CASES else {}
WRONG_KEY = "wrong-key-must-never-show-up"


def _gateway(url: str, **options: Any) -> ServerThread:
    config = Config(dialect="openai", upstreams=[f"gemini+{url}"], upstream_options={
        "retries": 2, "retry_backoff": 0.01, "max_retry_wait": 1.0, "models": ["gemini-2.5-flash"], **options},
        tools={"enabled": []}, rewrite={"steps": []})
    return ServerThread(create_app(config))


@pytest.fixture(scope="module")
def retrying(simulated: tuple[SimulatedGemini, ServerThread]) -> Iterator[ServerThread]:
    with _gateway(simulated[1].url, api_key=API_KEY) as server:
        yield server


def _ask(gateway: ServerThread) -> dict[str, Any]:
    answer = httpx.post(f"{gateway.base_url}/responses", json={"model": "gemini-2.5-flash", "input": "hi",
                                                               "stream": False}, timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _error(status: int, kind: str, message: str) -> bytes:
    return json.dumps({"error": {"code": status, "message": message, "status": kind}}).encode()


def test_a_refused_key_is_a_clear_auth_error_without_the_key(simulated: tuple[SimulatedGemini, ServerThread],
                                                             fake: SimulatedGemini,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with _gateway(simulated[1].url, api_key=WRONG_KEY) as gateway:
        answer = httpx.post(f"{gateway.base_url}/responses", json={"model": "gemini-2.5-flash", "input": "hi",
                                                                   "stream": True}, timeout=30)
    assert answer.status_code == 200
    assert fake.headers_seen[-1]["x-goog-api-key"] == WRONG_KEY  # sent where Gemini wants it...
    assert "upstream_auth" in answer.text and "GEMINI_API_KEY" in answer.text
    assert "UNAUTHENTICATED" in answer.text and "response.failed" in answer.text
    assert WRONG_KEY not in answer.text and WRONG_KEY not in caplog.text  # ...and nowhere else
    assert fake.requests == []  # (the simulated API refused it before reading a request)


def test_the_key_comes_from_the_environment_and_stays_out_of_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", WRONG_KEY)
    upstream = build_upstream("gemini+https://generativelanguage.googleapis.com")
    assert upstream._headers["x-goog-api-key"] == WRONG_KEY  # type: ignore[attr-defined]
    assert "authorization" not in upstream._headers  # type: ignore[attr-defined]
    assert WRONG_KEY not in repr(upstream) and WRONG_KEY not in str(vars(upstream).get("api_key"))
    assert upstream.models == []  # discovered at start(), not guessed


@pytest.mark.parametrize(("status", "kind", "headers"), [(429, "RESOURCE_EXHAUSTED", {"retry-after": "0.05"}),
                                                         (503, "UNAVAILABLE", {})])
def test_rate_limits_and_overload_are_retried(status: int, kind: str, headers: dict[str, str],
                                              fake: SimulatedGemini, retrying: ServerThread) -> None:
    fake.queue(Reply(status, _error(status, kind, "try again"), headers),
               Reply(status, _error(status, kind, "try again"), headers),
               Reply(200, (PROVIDERS / TEXT["file"]).read_bytes()))
    result = _ask(retrying)
    assert result["status"] == "completed" and result["output_text"] == TEXT["expect"]["output_text"]
    assert len(fake.requests) == 3


def test_retries_are_bounded(fake: SimulatedGemini, retrying: ServerThread) -> None:
    fake.queue(*[Reply(503, _error(503, "UNAVAILABLE", "The model is overloaded."))] * 4)
    result = _ask(retrying)
    assert result["status"] == "failed" and "overloaded" in result["error"]["message"]
    assert len(fake.requests) == 3  # one try and two retries
    fake.replies.clear()


def test_a_long_retry_delay_is_not_waited_here(fake: SimulatedGemini, retrying: ServerThread) -> None:
    """The recorded 429 asks for 48 s (RetryInfo): more than max_retry_wait, so it goes to the router at once."""
    quota = next(c for c in CASES if c["http_status"] == 429)
    fake.queue(Reply(429, (PROVIDERS / quota["file"]).read_bytes()))
    result = _ask(retrying)
    assert result["status"] == "failed" and result["error"]["code"] == "rate_limited"
    assert "RESOURCE_EXHAUSTED" in result["error"]["message"]
    assert len(fake.requests) == 1


def test_an_error_inside_the_stream_fails_the_response(fake: SimulatedGemini, retrying: ServerThread) -> None:
    fake.queue(Reply(200, sse_body(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Half an answer"}]}}]},
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})))
    result = _ask(retrying)
    assert result["status"] == "failed"
    assert "UNAVAILABLE" in result["error"]["message"] and "overloaded" in result["error"]["message"]
    assert len(fake.requests) == 1  # (text was shown: never retried)
