"""Every Gemini recording of tests/data/providers (expected.json), replayed by the SIMULATED Gemini API in random
pieces (UTF-8 characters and CRLF pairs split) through the real gateway (``--upstream gemini+http://...``, the
recorded model ids): the client's stream, read by ``respstream replay --json`` (the CLI), has the outcome
expected.json gives (status, incomplete reason, text, calls, reasoning and signatures, usage) and no protocol
violation. Second turns (``previous_response_id``, and ``store: false`` with the output replayed as input) check
what the gateway sends back to Gemini: every signature unchanged on the part it came with, every function call
answered by a ``functionResponse`` of the same name (and id when Gemini gave one) in the next user turn. Every
request body the gateway sent passed the ``google-genai`` SDK's types (the simulated provider validates them).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from providers.gemini.conftest import CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini
from respstream.cli import main as respstream_cli

TEXT_REPLY = "gemini/pydantic-ai__text-3-chunks.sse"


def _reply(case: dict[str, Any]) -> Reply:
    body = (PROVIDERS / case["file"]).read_bytes()
    return Reply(case["http_status"], body)


def _replay(stream: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = tmp_path / "client.sse"
    path.write_bytes(stream)
    capsys.readouterr()
    respstream_cli(["replay", "--json", str(path)])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def _first_request(case: dict[str, Any], *, store: bool = True) -> dict[str, Any]:
    request = case["request"]
    body: dict[str, Any] = {"model": case["model"], "input": request["input"], "stream": True, "store": store}
    if request["tools"]:
        body["tools"] = request["tools"]
    if request["max_output_tokens"] is not None:
        body["max_output_tokens"] = request["max_output_tokens"]
    if request["reasoning"]:
        body["reasoning"] = {"effort": request["reasoning"]["effort"]}
    return body


def _post(gateway: ServerThread, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(f"{gateway.base_url}/responses", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response


def _reasoning(output: list[dict[str, Any]]) -> tuple[str, list[str]]:
    text, signatures = "", []
    for item in output:
        if item.get("type") == "reasoning":
            assert item["id"].startswith("rs_")  # (OpenAI's kind of reasoning id)
            text += "".join(p.get("text", "") for p in item.get("summary") or ())
            if item.get("encrypted_content"):
                signatures.append(item["encrypted_content"])
    return text, signatures


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_recording_gives_the_expected_outcome(case: dict[str, Any], fake: SimulatedGemini, gateway: ServerThread,
                                              tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake.queue(_reply(case))
    got = _replay(_post(gateway, _first_request(case)).content, tmp_path, capsys)
    expect = case["expect"]
    assert fake.invalid == []
    assert len(fake.requests) == 1 and fake.requests[0][0] == case["model"]
    assert got["violations"] == []
    assert got["status"] in expect["status_any_of"], got["error"]
    if expect["http_error"] is not None:
        assert expect["error"]["upstream_type"] in got["error"]["message"]
        assert got["error"]["code"] == "rate_limited"
        return
    if got["status"] == "failed":  # a stream cut before its finishReason
        assert "cut" in got["error"]["message"], got["error"]
        return
    reason = (got["incomplete_details"] or {}).get("reason")
    assert reason == expect["incomplete_reason"]
    assert got["output_text"] == expect["output_text"]
    calls = got["tool_calls"]
    assert [c["name"] for c in calls] == [c["name"] for c in expect["tool_calls"]]
    assert [c["arguments"] for c in calls] == [c["arguments_raw"] for c in expect["tool_calls"]]
    assert len({c["call_id"] for c in calls}) == len(calls) and all(c["call_id"] for c in calls)
    for have, want in zip(calls, expect["tool_calls"], strict=True):
        if want["call_id"] is not None:
            assert have["call_id"] == want["call_id"]
    text, signatures = _reasoning(got["output"])
    assert text == expect["reasoning"]["text"]
    assert signatures == [s["value"] for s in expect["reasoning"]["signatures"]]
    assert text not in got["output_text"] or not text
    usage, want_usage = got["usage"], expect["usage"]
    assert usage["input_tokens"] == want_usage["input_tokens"]
    assert usage["output_tokens"] == want_usage["output_tokens"]
    assert usage["total_tokens"] == want_usage["total_tokens"]
    assert usage["input_tokens_details"]["cached_tokens"] == want_usage["cached_tokens"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == want_usage["reasoning_tokens"]


ROUND_TRIPS = [c for c in CASES if c["expect"]["reasoning"]["roundtrip"] != "none" or c["expect"]["tool_calls"]]


def _signed_parts(contents: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(where, signature)`` for every signed part: ``functionCall:NAME``, ``text`` or ``empty-text``."""
    found = []
    for content in contents:
        for part in content["parts"]:
            if "thoughtSignature" not in part:
                continue
            assert content["role"] == "model"
            if "functionCall" in part:
                where = f"functionCall:{part['functionCall']['name']}"
            else:
                where = "text" if part.get("text") else "empty-text"
            found.append((where, part["thoughtSignature"]))
    return found


@pytest.mark.parametrize("mode", ["previous_response_id", "store_false"])
@pytest.mark.parametrize("case", ROUND_TRIPS, ids=[c["case"] for c in ROUND_TRIPS])
def test_second_turn_sends_signatures_back_in_place(case: dict[str, Any], mode: str, fake: SimulatedGemini,
                                                   gateway: ServerThread, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    text_reply = next(c for c in CASES if c["file"] == TEXT_REPLY)
    fake.queue(_reply(case), _reply(text_reply))
    first = _first_request(case, store=mode != "store_false")
    got = _replay(_post(gateway, first).content, tmp_path, capsys)
    assert got["status"] == "completed", got["error"]
    outputs = [{"type": "function_call_output", "call_id": c["call_id"], "output": json.dumps({"ok": i})}
               for i, c in enumerate(got["tool_calls"])]
    second: dict[str, Any] = {"model": case["model"], "stream": True}
    if case["request"]["tools"]:
        second["tools"] = case["request"]["tools"]
    follow_up = outputs or [{"type": "message", "role": "user", "content": "Thanks. And in Spanish?"}]
    if mode == "previous_response_id":
        second["previous_response_id"] = got["response_id"]
        second["input"] = follow_up
    else:
        second["store"] = False
        second["input"] = [{"type": "message", "role": "user", "content": case["request"]["input"]},
                           *got["output"], *follow_up]
    answer = _replay(_post(gateway, second).content, tmp_path, capsys)
    assert answer["status"] == "completed", answer["error"]
    assert answer["output_text"] == text_reply["expect"]["output_text"]
    assert fake.invalid == []
    contents = fake.requests[-1][1]["contents"]
    want = [(s["on"], s["value"]) for s in case["expect"]["reasoning"]["signatures"]]
    assert _signed_parts(contents) == want
    assert contents[0] == {"role": "user", "parts": [{"text": case["request"]["input"]}]}
    model_turn = contents[1]
    assert model_turn["role"] == "model"
    called = [p["functionCall"] for p in model_turn["parts"] if "functionCall" in p]
    assert [c["name"] for c in called] == [c["name"] for c in got["tool_calls"]]
    assert [json.dumps(c["args"], separators=(",", ":")) for c in called] == \
        [c["arguments"] for c in got["tool_calls"]]
    answered = [p["functionResponse"] for p in contents[2]["parts"] if "functionResponse" in p]
    assert [r["name"] for r in answered] == [c["name"] for c in called]
    assert [r["response"] for r in answered] == [{"ok": i} for i in range(len(called))]
    for call, response, want_call in zip(called, answered, case["expect"]["tool_calls"], strict=True):
        assert call.get("id") == want_call["call_id"] == response.get("id")  # Gemini's ids back; ours never
    if not called:
        assert contents[2] == {"role": "user", "parts": [{"text": "Thanks. And in Spanish?"}]}
    texts = "".join(p.get("text", "") for p in model_turn["parts"])
    assert texts == case["expect"]["output_text"]  # the answer back, never its thought text


def test_the_copied_recordings_are_the_recorded_bytes() -> None:
    """Every Gemini file here is byte for byte the one expected.json describes (its sha256), all 15 of them."""
    assert len(CASES) == 15
    for case in CASES:
        assert hashlib.sha256((PROVIDERS / case["file"]).read_bytes()).hexdigest() == case["sha256"], case["file"]
