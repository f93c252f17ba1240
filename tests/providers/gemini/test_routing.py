"""Gemini among other upstreams: an overloaded Gemini fails over (after its bounded retries) to the route's next
upstream, here another kind of server (a SIMULATED Chat Completions one serving the same model id), and the
routing event says which; a background response from Gemini resumes from any point; signatures come back from
another instance sharing the store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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


def test_signatures_come_back_across_instances(simulated: tuple[SimulatedGemini, ServerThread],
                                               fake: SimulatedGemini, tmp_path: Path) -> None:
    """Two gateway instances on one SQLite store: the second turn, on the other instance, sends the first turn's
    signature back on its call."""
    case = next(c for c in CASES if c["case"] == "fantasy__parallel-calls-with-ids.sse")
    text = next(c for c in CASES if c["case"] == "pydantic-ai__text-3-chunks.sse")
    fake.queue(Reply(200, (PROVIDERS / case["file"]).read_bytes()), Reply(200, (PROVIDERS / text["file"]).read_bytes()))

    def instance(name: str) -> ServerThread:
        config = Config(dialect="openai", store=f"sqlite:///{tmp_path / 'shared.db'}", instance_id=name,
                        upstreams=[f"gemini+{simulated[1].url}"],
                        upstream_options={"api_key": API_KEY, "retries": 0, "models": [case["model"]]},
                        tools={"enabled": []}, rewrite={"steps": []})
        return ServerThread(create_app(config))

    with instance("a") as first, instance("b") as second:
        turn = httpx.post(f"{first.base_url}/responses", json={
            "model": case["model"], "input": case["request"]["input"], "tools": case["request"]["tools"],
            "stream": False}, timeout=30).json()
        calls = [i for i in turn["output"] if i["type"] == "function_call"]
        answer = httpx.post(f"{second.base_url}/responses", json={
            "model": case["model"], "previous_response_id": turn["id"], "tools": case["request"]["tools"],
            "input": [{"type": "function_call_output", "call_id": c["call_id"], "output": "5"} for c in calls],
            "stream": False}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["output_text"] == text["expect"]["output_text"]
    parts = fake.requests[-1][1]["contents"][1]["parts"]
    signature = case["expect"]["reasoning"]["signatures"][0]["value"]
    assert [(p["functionCall"]["id"], p.get("thoughtSignature")) for p in parts] == [
        ("8hd01vsf", signature), ("k0srpqrc", None)]
