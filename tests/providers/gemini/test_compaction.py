"""Compaction through the Gemini adapter, against the SIMULATED Gemini API: ``context_management`` past its
threshold, a ``compaction_trigger`` item and ``POST /v1/responses/compact``; what the adapter sends for the summary
and for the turns continuing from the ``compaction`` item (the summary in ``systemInstruction`` or as the user turn
that leads, ``contents`` starting with a user turn, a functionCall right after a user turn and its functionResponse
right after it, thought signatures before the compaction point never sent again)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from fakes.server_thread import ServerThread
from providers.compaction_turns import ANSWER, COMPACT, LONG, SUMMARY, compacted_turn, create_response
from providers.gemini.simulated_gemini import Reply, SimulatedGemini, sse_body
from respstream.protocol.stream import StreamCore
from respstream.server.inputs.compaction_item import SUMMARY_PREFIX, decode_compaction
from respstream.server.responses.compaction_step import SUMMARY_INSTRUCTIONS

MODEL = "gemini-2.5-flash"


def _text(text: str) -> Reply:
    return Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                                "finishReason": "STOP"}],
                                "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 4,
                                                  "totalTokenCount": 11}}))


def _call(name: str, args: dict[str, Any], signature: str) -> Reply:
    return Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": name, "args": args}, "thoughtSignature": signature}]}, "finishReason": "STOP"}]}))


def _create(gateway: ServerThread, body: dict[str, Any]) -> dict[str, Any]:
    return create_response(gateway, MODEL, body)


def _system(body: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in (body.get("systemInstruction") or {}).get("parts", []))


def _assert_well_formed(body: dict[str, Any]) -> None:
    """Gemini's contents rules: a user turn first; a functionCall turn right after a user turn (or after function
    responses); each functionResponse in the turn right after its call."""
    contents = body["contents"]
    assert contents[0]["role"] == "user", contents
    for at, content in enumerate(contents):
        if any("functionCall" in part for part in content["parts"]):
            assert at > 0 and contents[at - 1]["role"] == "user", contents
        for part in content["parts"]:
            if "functionResponse" in part:
                called = [p["functionCall"]["name"] for p in contents[at - 1]["parts"] if "functionCall" in p]
                assert part["functionResponse"]["name"] in called, contents


def _summary_request(body: dict[str, Any]) -> None:
    assert _system(body) == SUMMARY_INSTRUCTIONS
    assert [c["role"] for c in body["contents"]] == ["user"]
    assert "marigold2399" in body["contents"][0]["parts"][0]["text"]
    assert "tools" not in body and "thinkingConfig" not in body.get("generationConfig", {})


def test_context_management_compacts_before_the_answer(fake: SimulatedGemini, gateway: ServerThread) -> None:
    fake.queue(_text("Noted."), _text(SUMMARY), _text(ANSWER),
               _text("You are welcome."))
    second = compacted_turn(gateway, MODEL)
    _summary_request(fake.requests[1][1])
    answer = fake.requests[2][1]
    assert _system(answer) == SUMMARY_PREFIX + SUMMARY
    assert answer["contents"] == [{"role": "user", "parts": [{"text": "What did I plant?"}]}]
    third = _create(gateway, {"input": "Thanks!", "previous_response_id": second["id"]})
    assert third["output_text"] == "You are welcome."
    after = fake.requests[3][1]
    assert _system(after) == SUMMARY_PREFIX + SUMMARY
    assert [c["role"] for c in after["contents"]] == ["user", "model", "user"]
    assert "marigold2399" not in json.dumps(after)
    assert fake.invalid == []


def test_thought_signatures_before_the_compaction_are_not_sent_again(fake: SimulatedGemini,
                                                                     gateway: ServerThread) -> None:
    fake.queue(_call("lookup", {"q": "notes"}, "b2xkLXNpZ25hdHVyZQ=="), _call("weather", {"city": "Lisbon"},
                                                                          "bmV3LXNpZ25hdHVyZQ=="),
               _text("Summary: notes looked up; weather asked for Lisbon."), _text("Sunny in Lisbon."))
    tools = [{"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}
             for name in ("lookup", "weather")]
    first = _create(gateway, {"input": f"My notes: {LONG}", "tools": tools})
    old_call = first["output"][-1]["call_id"]
    second = _create(gateway, {"input": [{"type": "function_call_output", "call_id": old_call,
                                          "output": "notes found"}],
                               "previous_response_id": first["id"], "tools": tools})
    new_call = second["output"][-1]["call_id"]
    third = _create(gateway, {"input": [{"type": "function_call_output", "call_id": new_call, "output": "sunny"}],
                              "previous_response_id": second["id"], "context_management": COMPACT, "tools": tools})
    assert [i["type"] for i in third["output"]] == ["compaction", "message"], third["output"]
    summary, answer = fake.requests[2][1], fake.requests[3][1]
    assert "b2xkLXNpZ25hdHVyZQ==" not in json.dumps(summary) and "notes found" in json.dumps(summary)
    _assert_well_formed(answer)
    text = json.dumps(answer)
    assert "b2xkLXNpZ25hdHVyZQ==" not in text and "marigold2399" not in text
    assert answer["contents"][0] == {"role": "user", "parts": [
        {"text": SUMMARY_PREFIX + "Summary: notes looked up; weather asked for Lisbon."}]}
    assert answer["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "weather", "args": {"city": "Lisbon"}}, "thoughtSignature": "bmV3LXNpZ25hdHVyZQ=="}]}
    assert answer["contents"][2]["parts"][0]["functionResponse"]["name"] == "weather"
    assert fake.invalid == []


def test_a_compaction_trigger_ends_the_response_with_the_item(fake: SimulatedGemini, gateway: ServerThread) -> None:
    fake.queue(_text("Short summary."), _text("Carrying on."))
    done = _create(gateway, {"input": [{"role": "user", "content": f"Notes: {LONG}"},
                                       {"role": "assistant", "content": "Noted."},
                                       {"type": "compaction_trigger"}]})
    assert [i["type"] for i in done["output"]] == ["compaction"] and done["status"] == "completed"
    _summary_request(fake.requests[0][1])
    after = _create(gateway, {"input": [done["output"][0], {"role": "user", "content": "Go on."}]})
    assert after["output_text"] == "Carrying on."
    body = fake.requests[1][1]
    assert _system(body) == SUMMARY_PREFIX + "Short summary."
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Go on."}]}]
    assert fake.invalid == []


def test_responses_compact_summarises_on_the_provider(fake: SimulatedGemini, gateway: ServerThread) -> None:
    fake.queue(_text("Compacted."))
    answer = httpx.post(f"{gateway.base_url}/responses/compact", json={
        "model": MODEL, "input": [{"role": "user", "content": f"Notes: {LONG}"},
                                  {"role": "assistant", "content": "Noted."}]}, timeout=30)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert [i["type"] for i in result["output"]] == ["message", "compaction"]
    assert decode_compaction(result["output"][-1]["encrypted_content"]) == "Compacted."
    assert result["usage"]["output_tokens"] == 4  # the provider's own count
    _summary_request(fake.requests[0][1])
    assert fake.invalid == []


def test_streamed_compaction_is_a_clean_stream_and_a_conversation_restarts_at_it(
        fake: SimulatedGemini, gateway: ServerThread) -> None:
    fake.queue(_text("Noted."), _text("Marigolds, 2400 of them."), _text("Marigolds."), _text("Bye."))
    conversation = httpx.post(f"{gateway.base_url}/conversations", json={}, timeout=30).json()["id"]
    _create(gateway, {"input": f"My garden notes: {LONG}", "conversation": conversation})
    streamed = httpx.post(f"{gateway.base_url}/responses", timeout=30, json={
        "model": MODEL, "input": "What did I plant?", "conversation": conversation, "context_management": COMPACT,
        "stream": True})
    assert streamed.status_code == 200, streamed.text
    core = StreamCore(dialect="openai")
    core.feed(streamed.content)
    core.close()
    assert [v.to_json() for v in core.violations] == []
    result = core.result.to_json()
    assert [i["type"] for i in result["output"]] == ["compaction", "message"] and result["status"] == "completed"
    _create(gateway, {"input": "Bye!", "conversation": conversation})
    last = fake.requests[3][1]
    assert _system(last) == SUMMARY_PREFIX + "Marigolds, 2400 of them."
    assert "marigold2399" not in json.dumps(last)
    _assert_well_formed(last)
    assert fake.invalid == []
