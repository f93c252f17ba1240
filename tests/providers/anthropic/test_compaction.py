"""Compaction through the Anthropic adapter, against the SIMULATED Anthropic provider: ``context_management`` past
its threshold, a ``compaction_trigger`` item and ``POST /v1/responses/compact``; what the adapter sends upstream for
the summary and for the turns that continue from the ``compaction`` item (the summary as system text, roles
alternating from a user turn, signed thinking before the compaction point never sent again, a tool call kept with
its result)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx

from fakes.server_thread import ServerThread
from providers.compaction_turns import ANSWER, COMPACT, LONG, SUMMARY, compacted_turn, create_response
from respstream.server.inputs.compaction_item import SUMMARY_PREFIX, decode_compaction
from respstream.server.responses.compaction_step import SUMMARY_INSTRUCTIONS

from .conftest import post
from .made_streams import text_stream, thinking_tool_stream
from .simulated_anthropic import Reply, SimulatedAnthropic

MODEL = "claude-sonnet-4-20250514"
SIGNATURE = "EqQBCkYIBxgCKkBsignedthinkingbeforethecompaction"


def _create(gateway: ServerThread, body: dict[str, Any]) -> dict[str, Any]:
    return create_response(gateway, MODEL, body)


def _system_text(body: dict[str, Any]) -> str:
    return "".join(block["text"] for block in body.get("system", []))


def _assert_well_formed(body: dict[str, Any]) -> None:
    """Anthropic's rules: turns alternate, starting with a user turn; each tool_result follows its tool_use."""
    roles = [turn["role"] for turn in body["messages"]]
    assert roles[0] == "user", roles
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for at, turn in enumerate(body["messages"]):
        for block in turn["content"]:
            if block["type"] == "tool_result":
                before = body["messages"][at - 1]["content"] if at else []
                assert any(b["type"] == "tool_use" and b["id"] == block["tool_use_id"] for b in before), body


def _summary_request(seen: dict[str, Any]) -> None:
    assert _system_text(seen) == SUMMARY_INSTRUCTIONS
    assert [t["role"] for t in seen["messages"]] == ["user"]
    transcript = seen["messages"][0]["content"][0]["text"]
    assert "marigold2399" in transcript
    assert "thinking" not in seen and "tools" not in seen and "tool_choice" not in seen


def test_context_management_compacts_before_the_answer(gateway: ServerThread, sim: SimulatedAnthropic) -> None:
    sim.replies.extend([Reply(text_stream("Noted.")), Reply(text_stream(SUMMARY)),
                        Reply(text_stream(ANSWER)), Reply(text_stream("You are welcome."))])
    second = compacted_turn(gateway, MODEL)
    _summary_request(sim.requests[1].body)
    answer = sim.requests[2].body
    assert _system_text(answer) == SUMMARY_PREFIX + SUMMARY
    assert answer["messages"] == [{"role": "user", "content": [{"type": "text", "text": "What did I plant?"}]}]
    # the next turn of the chain continues from the compaction: the summary once, as system text
    third = _create(gateway, {"input": "Thanks!", "previous_response_id": second["id"]})
    assert third["output_text"] == "You are welcome."
    after = sim.requests[3].body
    assert _system_text(after) == SUMMARY_PREFIX + SUMMARY
    assert [t["role"] for t in after["messages"]] == ["user", "assistant", "user"]
    assert "marigold2399" not in json.dumps(after)
    _assert_well_formed(after)
    assert sim.problems == []


def test_signed_thinking_before_the_compaction_is_not_sent_again(gateway: ServerThread,
                                                                  sim: SimulatedAnthropic) -> None:
    """A tool round split by compaction: the call stays with its result (Anthropic pairs them), with the signed
    thinking of that turn; the thinking of turns before the compaction point is summarised, not replayed."""
    old_signature = "EqQBCkYIBxgCKkBoldsignature"
    sim.replies.extend([
        Reply(thinking_tool_stream("Look the notes up.", old_signature, "lookup", {"q": "notes"},
                                   call_id="toolu_old")),
        Reply(thinking_tool_stream("Now the weather.", SIGNATURE, "weather", {"city": "Lisbon"},
                                   call_id="toolu_new")),
        Reply(text_stream("Summary: notes looked up; weather asked for Lisbon.")),
        Reply(text_stream("Sunny in Lisbon.")),
    ])
    tools = [{"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}
             for name in ("lookup", "weather")]
    common = {"tools": tools, "reasoning": {"effort": "medium"}}
    first = _create(gateway, {"input": f"My notes: {LONG}", **common})
    second = _create(gateway, {"input": [{"type": "function_call_output", "call_id": "toolu_old",
                                          "output": "notes found"}],
                               "previous_response_id": first["id"], **common})
    third = _create(gateway, {"input": [{"type": "function_call_output", "call_id": "toolu_new",
                                         "output": "sunny"}],
                              "previous_response_id": second["id"], "context_management": COMPACT, **common})
    assert [i["type"] for i in third["output"]] == ["compaction", "message"], third["output"]
    summary, answer = sim.requests[2].body, sim.requests[3].body
    assert old_signature not in json.dumps(summary) and "notes found" in json.dumps(summary)
    _assert_well_formed(answer)
    text = json.dumps(answer)
    assert old_signature not in text and "marigold2399" not in text
    # the calling turn leads the tail: the summary is the user turn before it, not system text
    assert answer["messages"][0] == {"role": "user", "content": [
        {"type": "text", "text": SUMMARY_PREFIX + "Summary: notes looked up; weather asked for Lisbon."}]}
    assert "Summary of" not in _system_text(answer)
    assistant = answer["messages"][-2]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Now the weather.", "signature": SIGNATURE}
    assert assistant["content"][1]["type"] == "tool_use" and assistant["content"][1]["id"] == "toolu_new"
    assert answer["messages"][-1]["content"][0]["type"] == "tool_result"
    assert sim.problems == []


def test_a_compaction_trigger_ends_the_response_with_the_item(gateway: ServerThread, sim: SimulatedAnthropic) -> None:
    sim.replies.extend([Reply(text_stream("Short summary.")), Reply(text_stream("Carrying on."))])
    done = _create(gateway, {"input": [{"role": "user", "content": f"Notes: {LONG}"},
                                       {"role": "assistant", "content": "Noted."},
                                       {"type": "compaction_trigger"}]})
    assert [i["type"] for i in done["output"]] == ["compaction"] and done["status"] == "completed"
    _summary_request(sim.requests[0].body)
    # the item handed back as input on a new turn: system text, then a user turn first
    after = _create(gateway, {"input": [done["output"][0], {"role": "user", "content": "Go on."}]})
    assert after["output_text"] == "Carrying on."
    body = sim.requests[1].body
    assert _system_text(body) == SUMMARY_PREFIX + "Short summary."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Go on."}]}]
    assert sim.problems == []


def test_responses_compact_summarises_on_the_provider(gateway: ServerThread, sim: SimulatedAnthropic) -> None:
    sim.replies.append(Reply(text_stream("Compacted.")))
    answer = httpx.post(f"{gateway.base_url}/responses/compact", json={
        "model": MODEL, "input": [{"role": "user", "content": f"Notes: {LONG}"},
                                  {"role": "assistant", "content": "Noted."}]}, timeout=30)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["object"] == "response.compaction"
    assert [i["type"] for i in result["output"]] == ["message", "compaction"]
    assert decode_compaction(result["output"][-1]["encrypted_content"]) == "Compacted."
    assert result["usage"]["output_tokens"] == 3  # the provider's own count
    _summary_request(sim.requests[0].body)
    assert sim.problems == []


def test_streamed_compaction_is_a_clean_stream_and_a_conversation_restarts_at_it(
        gateway: ServerThread, sim: SimulatedAnthropic) -> None:
    """SSE: the compaction item first, then the answer, no rule broken; in a conversation the next turn sends the
    summary once and nothing from before it."""
    sim.replies.extend([Reply(text_stream("Noted.")), Reply(text_stream("Marigolds, 2400 of them.")),
                        Reply(text_stream("Marigolds.")), Reply(text_stream("Bye."))])
    conversation = httpx.post(f"{gateway.base_url}/conversations", json={}, timeout=30).json()["id"]
    first = _create(gateway, {"input": f"My garden notes: {LONG}", "conversation": conversation})
    assert first["status"] == "completed"
    result, violations, response = post(gateway, {"model": MODEL, "input": "What did I plant?",
                                                  "conversation": conversation, "context_management": COMPACT})
    assert response.status_code == 200 and violations == [], violations
    assert [i["type"] for i in result["output"]] == ["compaction", "message"], result["output"]
    assert result["status"] == "completed"
    _create(gateway, {"input": "Bye!", "conversation": conversation})
    last = sim.requests[3].body
    assert _system_text(last) == SUMMARY_PREFIX + "Marigolds, 2400 of them."
    assert "marigold2399" not in json.dumps(last)
    _assert_well_formed(last)
    assert sim.problems == []
