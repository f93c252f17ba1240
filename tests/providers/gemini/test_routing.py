"""Gemini among other upstreams: an overloaded Gemini fails over (after its bounded retries) to the route's next
upstream, here another kind of server (a SIMULATED Chat Completions one serving the same model id), and the
routing event says which; a background response from Gemini resumes from any point."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text
from fakes.server_thread import ServerThread
from providers.gemini.conftest import API_KEY, CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini
from respstream.server.config import Config
from respstream.server.http.app import create_app

OVERLOADED = json.dumps({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer(models=["gemini-2.5-flash"]) as server:
        yield server


@pytest.fixture(scope="module")
def two_kinds(simulated: tuple[SimulatedGemini, ServerThread], chat: FakeChatCompletionsServer
              ) -> Iterator[ServerThread]:
    gemini = f"gemini+{simulated[1].url}"
    config = Config(dialect="openai", upstreams=[gemini, f"chat+{chat.url}"],
                    upstream_options={"retries": 1, "retry_backoff": 0.01, "per_upstream": {gemini: {
                        "api_key": API_KEY, "models": ["gemini-2.5-flash"]}}},
                    tools={"enabled": []}, rewrite={"steps": []})
    with ServerThread(create_app(config)) as server:
        yield server


def _events(body: str) -> list[dict[str, object]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


def test_an_overloaded_gemini_fails_over_to_another_kind_of_upstream(fake: SimulatedGemini,
                                                                     chat: FakeChatCompletionsServer,
                                                                     two_kinds: ServerThread) -> None:
    fake.queue(Reply(503, OVERLOADED.encode()), Reply(503, OVERLOADED.encode()))
    chat.reset()
    chat.script(text("From the other upstream."), finish(), Done())
    answer = httpx.post(f"{two_kinds.base_url}/responses", json={"model": "auto", "input": "hi", "stream": True},
                        timeout=30)
    assert answer.status_code == 200
    events = _events(answer.text)
    assert len(fake.requests) == 2  # one try, one retry, then the router
    routing = [e for e in events if str(e["type"]).endswith("response.routing.completed")]
    assert [r["source"] for r in routing][-1] == "fallback", routing
    assert "upstream_error" in str(routing[-1]["reasoning"]) and chat.url.split("//")[1].split("/")[0] in str(
        routing[-1]["reasoning"])
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output_text"] == "From the other upstream."  # type: ignore[index]


def test_a_background_gemini_response_resumes_anywhere(fake: SimulatedGemini, gateway: ServerThread) -> None:
    case = next(c for c in CASES if c["case"] == "pydantic-ai__thought-summaries-then-text.sse")
    fake.queue(Reply(200, (PROVIDERS / case["file"]).read_bytes()))
    queued = httpx.post(f"{gateway.base_url}/responses", json={
        "model": "gemini-2.5-flash", "input": case["request"]["input"], "background": True,
        "reasoning": {"effort": "medium"}}, timeout=30).json()
    whole = httpx.get(f"{gateway.base_url}/responses/{queued['id']}", params={"stream": "true"}, timeout=30)
    events = _events(whole.text)
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output_text"] == case["expect"]["output_text"]  # type: ignore[index]
    middle = len(events) // 2
    rest = httpx.get(f"{gateway.base_url}/responses/{queued['id']}",
                     params={"stream": "true", "starting_after": str(middle)}, timeout=30)
    assert _events(rest.text) == events[middle + 1:]
    sent = fake.requests[-1][1]
    assert sent["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 8192, "includeThoughts": True}
