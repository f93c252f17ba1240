"""``context_management`` (auto-compaction past a token threshold) and the ``compaction_trigger`` input item, end to
end: over HTTP (SSE and JSON) and WebSocket, through the SIMULATED scripted upstream and a SIMULATED Chat Completions
server (tests/fakes/chat_server.py) that records what the model was sent; with previous_response_id chains and
conversations; and the refusals.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from fakes.chat_server import Done, FakeChatCompletionsServer, Sleep, Status, finish, text, tool
from fakes.responses_upstream import FakeResponsesUpstream
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.inputs.compaction_item import decode_compaction, encode_compaction
from respstream.server.inputs.history import items_from_json
from respstream.server.responses.compaction_step import SUMMARY_INSTRUCTIONS

from .helpers import ServerThread, post_stream

# About 2,400 words: past a 1,000-token threshold by any count; a word appears only here.
LONG = " ".join(f"marigold{i}" for i in range(2400))
COMPACT = [{"type": "compaction", "compact_threshold": 1000}]


def _history(final: str = "What did I plant?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"My garden notes: {LONG}"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": final}]


# -- refusals ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scripted() -> Iterator[httpx.Client]:
    app = create_app(Config(dialect="openai", upstreams=["scripted:6"]))
    with ServerThread(app, lifespan="on", ws="websockets-sansio") as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        client.ws_port = server.port  # type: ignore[attr-defined]
        yield client


@pytest.mark.parametrize(("extra", "code", "param"), [
    ({"context_management": [{"type": "compaction", "compact_threshold": 999}]}, "invalid_value",
     "context_management[0].compact_threshold"),
    ({"context_management": [{"type": "compaction", "compact_threshold": "2000"}]}, "invalid_type",
     "context_management[0].compact_threshold"),
    ({"context_management": [{"type": "truncate"}]}, "unsupported_parameter", "context_management[0].type"),
    ({"context_management": [{"type": "compaction", "keep_last": 3}]}, "unsupported_parameter",
     "context_management[0].keep_last"),
    ({"context_management": [*COMPACT, *COMPACT]}, "invalid_value", "context_management[1]"),
    ({"context_management": {"type": "compaction"}}, "invalid_type", "context_management"),
    ({"input": [{"type": "compaction_trigger"}, {"role": "user", "content": "hi"}]}, "invalid_value", "input[0]"),
    ({"input": [{"role": "user", "content": "hi"}, {"type": "compaction_trigger", "id": "ct_1"}]},
     "unsupported_parameter", "input[1].id"),
    ({"input": [{"type": "compaction_trigger"}]}, "missing_required_parameter", "input"),
    ({"conversation": "conv_1", "previous_response_id": "resp_1"}, "invalid_value", "conversation"),
    ({"input": [{"role": "system", "content": "Be brief."}, {"type": "compaction_trigger"}]},
     "missing_required_parameter", "input"),
], ids=["threshold-below-1000", "threshold-type", "entry-type", "entry-key", "two-entries", "not-a-list",
        "trigger-not-last", "trigger-with-id", "trigger-with-nothing", "conversation-and-previous",
        "trigger-only-instructions"])
def test_refused_combinations_name_the_field(scripted: httpx.Client, extra: dict[str, Any], code: str,
                                             param: str) -> None:
    answer = scripted.post("/v1/responses", json={"input": "Say hi.", "stream": False, **extra})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == (code, param), error
    if param == "input[0]" and code == "invalid_value":
        assert error["message"] == "The 'compaction_trigger' item must be the final input item."


def test_without_threshold_an_unknown_window_is_a_400(scripted: httpx.Client) -> None:
    answer = scripted.post("/v1/responses", json={"input": _history(), "stream": False,
                                                  "context_management": [{"type": "compaction"}]})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "context_management[0].compact_threshold"


# -- the scripted upstream -----------------------------------------------------------------------------------------
def _input_tokens(client: httpx.Client, **body: Any) -> int:
    counted = client.post("/v1/responses/input_tokens", json={"input": "And now?", **body})
    assert counted.status_code == 200, counted.text
    return int(counted.json()["input_tokens"])


@pytest.mark.parametrize("dialect", ["openai", "platform", "openresponses"])
def test_a_context_past_the_threshold_is_compacted_first_in_the_stream(dialect: str) -> None:
    app = create_app(Config(dialect=dialect, upstreams=["scripted:6"]))
    with ServerThread(app, lifespan="on") as server:
        d = post_stream(server.url, {"input": _history(), "stream": True, "context_management": COMPACT},
                        dialect=dialect)
    assert d.status_code == 200, d.raw[:300]
    assert d.violations == [], d.violations
    added = [p["item"]["type"] for p in d.payloads() if p.get("type") == "response.output_item.added"]
    assert added[:2] == ["compaction", "message"], added
    final = d.payloads()[-1].get("response", d.payloads()[-1])
    item = final["output"][0]
    assert item["type"] == "compaction" and item["id"]
    assert decode_compaction(item["encrypted_content"]).startswith("The quick brown")  # the scripted summary
    assert final["context_management"] == COMPACT
    assert final["usage"]["output_tokens"] > 6  # the summary's tokens count too


def test_below_the_threshold_nothing_is_compacted(scripted: httpx.Client) -> None:
    answer = scripted.post("/v1/responses", json={"input": "Say hi.", "stream": False,
                                                  "context_management": COMPACT})
    assert answer.status_code == 200, answer.text
    assert [i["type"] for i in answer.json()["output"]] == ["message"]


def test_a_chain_continues_from_the_compaction(scripted: httpx.Client) -> None:
    plain = scripted.post("/v1/responses", json={"input": _history(), "stream": False}).json()
    compacted = scripted.post("/v1/responses", json={"input": _history(), "stream": False,
                                                      "context_management": COMPACT}).json()
    assert compacted["output"][0]["type"] == "compaction"
    full = _input_tokens(scripted, previous_response_id=plain["id"])
    after = _input_tokens(scripted, previous_response_id=compacted["id"])
    assert full > 2400 and after < 100, (full, after)
    # The next turn runs from the compacted context (and compacts nothing more).
    turn = scripted.post("/v1/responses", json={"input": "And now?", "stream": False, "context_management": COMPACT,
                                                "previous_response_id": compacted["id"]})
    assert [i["type"] for i in turn.json()["output"]] == ["message"]


def test_a_trigger_answers_with_the_compaction_item_only(scripted: httpx.Client) -> None:
    first = scripted.post("/v1/responses", json={"input": _history(), "stream": False}).json()
    compacted = scripted.post("/v1/responses", json={"input": [{"type": "compaction_trigger"}], "stream": False,
                                                      "previous_response_id": first["id"]})
    assert compacted.status_code == 200, compacted.text
    body = compacted.json()
    assert body["status"] == "completed"
    assert [i["type"] for i in body["output"]] == ["compaction"]
    assert _input_tokens(scripted, previous_response_id=body["id"]) < 100
    # Stateless: the item goes back as input (Codex's remote compaction), with the trigger on the same list.
    again = scripted.post("/v1/responses", json={"stream": False, "store": False, "input": [
        body["output"][0], {"role": "user", "content": "Go on."}, {"type": "compaction_trigger"}]})
    assert [i["type"] for i in again.json()["output"]] == ["compaction"]


def test_a_conversation_restarts_at_its_compaction(scripted: httpx.Client) -> None:
    conversation = scripted.post("/v1/conversations", json={}).json()["id"]
    answer = scripted.post("/v1/responses", json={"input": f"Notes: {LONG}", "stream": False,
                                                  "conversation": conversation})
    assert answer.status_code == 200, answer.text
    before = _input_tokens(scripted, conversation=conversation)
    compacted = scripted.post("/v1/responses", json={"input": "What did I plant?", "stream": False,
                                                      "conversation": conversation, "context_management": COMPACT})
    assert [i["type"] for i in compacted.json()["output"]] == ["compaction", "message"]
    items = scripted.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()["data"]
    kinds = [i["type"] for i in items]
    assert kinds.index("compaction") == len(kinds) - 3, kinds  # the compaction, then this turn's input and answer
    after = _input_tokens(scripted, conversation=conversation)
    assert before > 2400 and after < 100, (before, after)


def test_over_a_websocket_the_compaction_streams_too(scripted: httpx.Client) -> None:
    port = scripted.ws_port  # type: ignore[attr-defined]
    with connect(f"ws://127.0.0.1:{port}/v1/responses") as ws:
        ws.send(json.dumps({"type": "response.create", "input": _history(), "context_management": COMPACT}))
        events = []
        while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(json.loads(ws.recv(timeout=10)))
        assert events[-1]["type"] == "response.completed", events[-1]
        assert [i["type"] for i in events[-1]["response"]["output"]] == ["compaction", "message"]
        ws.send(json.dumps({"type": "response.create", "input": [{"type": "compaction_trigger"}],
                            "previous_response_id": events[-1]["response"]["id"]}))
        last: dict[str, Any] = {}
        while last.get("type") not in ("response.completed", "response.failed", "error"):
            last = json.loads(ws.recv(timeout=10))
        assert [i["type"] for i in last["response"]["output"]] == ["compaction"], last


# -- a Chat Completions upstream: what the model is sent -----------------------------------------------------------
@pytest.fixture(scope="module")
def chat() -> Iterator[tuple[httpx.Client, FakeChatCompletionsServer]]:
    with FakeChatCompletionsServer(models=["fake-model"]) as fake:
        config = Config(dialect="openai", upstreams=[fake.url], upstream_options={"retries": 0},
                        models={"context_window": {"fake-model": 32000}})
        with ServerThread(create_app(config), lifespan="on") as server, \
                httpx.Client(base_url=server.url, timeout=30) as client:
            yield client, fake


def _sent_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


def test_the_model_answers_from_the_summary_and_the_current_turn(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(text("Planted marigolds."), finish(), Done())  # the summary
    fake.script(text("Marigolds."), finish(), Done())  # the answer
    answer = client.post("/v1/responses", json={"model": "fake-model", "input": _history(), "stream": False,
                                                "instructions": "Be brief.", "context_management": COMPACT})
    assert answer.status_code == 200, answer.text
    output = answer.json()["output"]
    assert decode_compaction(output[0]["encrypted_content"]) == "Planted marigolds."
    assert output[1]["content"][0]["text"] == "Marigolds."
    summarising, answering = fake.requests
    assert summarising["messages"][0]["content"] == SUMMARY_INSTRUCTIONS
    assert "marigold2399" in _sent_text(summarising)
    assert "marigold2399" not in _sent_text(answering)
    assert answering["messages"][0] == {"role": "system", "content": "Be brief."}
    assert answering["messages"][1]["content"] == "Summary of the earlier conversation: Planted marigolds."
    assert answering["messages"][-1] == {"role": "user", "content": "What did I plant?"}


def test_the_summary_is_sampled_at_the_responses_temperature(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    # (a client asking for temperature 0 gets a summary at 0 too: a small model sampled at its default may loop past
    # its window instead of summarising)
    client, fake = chat
    for temperature in (0, 0.7):
        fake.reset()
        fake.script(text("Planted marigolds."), finish(), Done())  # the summary
        fake.script(text("Marigolds."), finish(), Done())  # the answer
        answer = client.post("/v1/responses", json={"model": "fake-model", "input": _history(), "stream": False,
                                                    "temperature": temperature, "context_management": COMPACT})
        assert answer.status_code == 200, answer.text
        summarising, answering = fake.requests
        assert summarising["messages"][0]["content"] == SUMMARY_INSTRUCTIONS
        assert summarising["temperature"] == answering["temperature"] == temperature, (summarising, answering)


def test_a_tool_output_keeps_its_call_across_the_compaction(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    """The output of a call made in the compacted turn: the call stays with it after the summary (Chat Completions
    wants a tool message right after the assistant's tool_calls), and the summary is the user turn before them."""
    client, fake = chat
    fake.reset()
    fake.script(tool(0, id="call_1", name="lookup", args='{"q": "notes"}'), finish("tool_calls"), Done())
    fake.script(text("Looked the notes up."), finish(), Done())  # the summary
    fake.script(text("Marigolds."), finish(), Done())  # the answer
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]
    first = client.post("/v1/responses", json={"model": "fake-model", "input": f"My notes: {LONG}", "tools": tools,
                                               "stream": False}).json()
    assert first["output"][-1]["type"] == "function_call", first
    answer = client.post("/v1/responses", json={
        "model": "fake-model", "previous_response_id": first["id"], "tools": tools, "stream": False,
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "marigolds"}],
        "context_management": COMPACT})
    assert [i["type"] for i in answer.json()["output"]] == ["compaction", "message"], answer.text
    answering = fake.requests[2]["messages"]
    assert [m["role"] for m in answering] == ["user", "assistant", "tool"], answering
    assert answering[0]["content"] == "Summary of the earlier conversation: Looked the notes up."
    assert answering[1]["tool_calls"][0]["id"] == "call_1" and answering[2]["tool_call_id"] == "call_1"
    assert "marigold2399" not in _sent_text(fake.requests[2])


def test_without_threshold_the_known_window_decides(chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset(default_script=True)
    answer = client.post("/v1/responses", json={"model": "fake-model", "input": _history(), "stream": False,
                                                "context_management": [{"type": "compaction"}]})
    assert [i["type"] for i in answer.json()["output"]] == ["message"]  # 2,400 words < 80% of 32,000
    assert len(fake.requests) == 1


def test_a_failed_summary_fails_the_response(chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(Status(500, {"error": {"message": "boom"}}))
    answer = client.post("/v1/responses", json={"model": "fake-model", "input": _history(), "stream": False,
                                                "context_management": COMPACT})
    body = answer.json()
    assert body["status"] == "failed", body
    assert "context compaction failed" in body["error"]["message"]
    assert len(fake.requests) == 1  # nothing was generated from the uncompacted context


def test_cancelling_a_compacting_response_cancels_its_summary(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(text("Planted"), Sleep(30), finish(), Done())  # a summary that would take 30 s
    started = client.post("/v1/responses", json={"model": "fake-model", "input": _history(), "background": True,
                                                 "context_management": COMPACT})
    assert started.status_code == 200, started.text
    rid = started.json()["id"]
    assert fake.wait_for_requests(1, timeout=10)  # the summary is being generated
    cancelled = client.post(f"/v1/responses/{rid}/cancel").json()
    assert cancelled["status"] == "cancelled", cancelled
    assert fake.wait_finished(1, timeout=10), "the summary's upstream stream was left running"
    assert fake.client_disconnects == 1 and len(fake.requests) == 1


def test_a_current_turn_still_over_the_window_fails_after_compacting(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(text("Short talk."), finish(), Done())
    huge = " ".join(["word"] * 40000)  # over the 32,000-token window by itself
    answer = client.post("/v1/responses", json={"model": "fake-model", "stream": False, "context_management": COMPACT,
                                                "input": [*_history()[:2], {"role": "user", "content": huge}]})
    body = answer.json()
    assert body["status"] == "failed", body["status"]
    assert body["error"]["code"] == "context_length_exceeded"
    assert body["error"]["message"].startswith("after compaction:")
    assert len(fake.requests) == 1  # the summary only; the model was never sent what cannot fit


# -- a native Responses upstream -------------------------------------------------------------------------------------
def test_a_native_responses_upstream_answers_from_the_summary() -> None:
    with FakeResponsesUpstream() as upstream:
        config = Config(dialect="openai", upstreams=[f"responses+{upstream.base_url}"],
                        upstream_options={"retries": 0, "idle_timeout": 5.0}, rewrite={"steps": []})
        with ServerThread(create_app(config), lifespan="on") as server, \
                httpx.Client(base_url=server.url, timeout=30) as client:
            answer = client.post("/v1/responses", json={"model": "llamacpp_native_text", "input": _history(),
                                                        "stream": False, "context_management": COMPACT})
        assert answer.status_code == 200, answer.text
        output = answer.json()["output"]
        assert [i["type"] for i in output] == ["compaction", "message"]
        summary = decode_compaction(output[0]["encrypted_content"])
        assert summary == output[1]["content"][0]["text"]  # the replayed transcript answers both requests
        summarising, answering = (json.dumps(r) for r in upstream.requests)
        assert "marigold2399" in summarising and "marigold2399" not in answering
        assert "Summary of the earlier conversation" in answering


# -- stored conversation items -------------------------------------------------------------------------------------
def test_stored_items_restart_at_the_last_compaction_keeping_instructions() -> None:
    def message(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    stored = [message("developer", "Be brief."), message("user", "old"),
              {"type": "compaction", "encrypted_content": encode_compaction("first", "m")},
              message("user", "middle"),
              {"type": "compaction", "encrypted_content": "not ours"},  # a client's: kept out, the rest stays
              {"type": "compaction", "encrypted_content": encode_compaction("second", "m")},
              message("user", "new")]
    items = items_from_json(stored)
    assert [(i.role, i.text) for i in items] == [
        ("developer", "Be brief."), ("system", "Summary of the earlier conversation: second"), ("user", "new")]
