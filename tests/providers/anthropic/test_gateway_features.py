"""What the gateway does on top of any upstream works unchanged on an Anthropic one: background responses resumed
from any point, and conversations (the stored turns go back upstream, the signed thinking with them)."""

from __future__ import annotations

import httpx

from fakes.server_thread import ServerThread
from respstream.protocol.stream import StreamCore

from .conftest import CASES, body_of
from .simulated_anthropic import Reply, SimulatedAnthropic


def test_background_response_resumes_from_any_point(gateway: ServerThread, sim: SimulatedAnthropic) -> None:
    case = CASES["fantasy__text-multibyte.sse"]
    sim.replies.append(Reply(body_of(case)))
    with httpx.Client(timeout=30) as client:
        queued = client.post(f"{gateway.base_url}/responses", json={
            "model": case["model"], "input": "Say hi in Portuguese", "background": True}).json()
        rid = queued["id"]
        for after in (-1, 3, 7):  # (the first tails the log until the terminal: no waiting loop)
            resumed = client.get(f"{gateway.base_url}/responses/{rid}",
                                 params={"stream": "true", "starting_after": after})
            core = StreamCore(dialect="openai", starting_after=after)
            core.feed(resumed.content)
            core.close()
            assert [v.to_json() for v in core.violations] == []
            assert core.result.to_json()["status"] == "completed"
        final = client.get(f"{gateway.base_url}/responses/{rid}").json()
    assert final["output"][-1]["content"][0]["text"] == case["expect"]["output_text"]


def test_conversation_sends_its_turns_back_with_the_signed_thinking(gateway: ServerThread,
                                                                     sim: SimulatedAnthropic) -> None:
    case = CASES["pydantic-ai__thinking-signature.sse"]
    signature = case["expect"]["reasoning"]["signatures"][0]["value"]
    sim.replies.extend([Reply(body_of(case)), Reply(body_of(CASES["langchaingo__text-count.sse"]))])
    with httpx.Client(timeout=30) as client:
        conversation = client.post(f"{gateway.base_url}/conversations", json={}).json()["id"]
        for text in ("How do I cross the street?", "And at night?"):
            answer = client.post(f"{gateway.base_url}/responses", json={
                "model": case["model"], "input": text, "conversation": conversation,
                "reasoning": {"effort": "medium"}}).json()
            assert answer["status"] == "completed", answer
    turns = sim.requests[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"][0] == {"type": "thinking", "thinking": case["expect"]["reasoning"]["text"],
                                      "signature": signature}
    assert turns[1]["content"][1] == {"type": "text", "text": case["expect"]["output_text"]}
    assert sim.problems == []
