"""Gemini behind the gateway's own machinery: a server tool round inside one response (the call's signature goes
back on the next round, with the round's reasoning item: server/responses/tool_rounds.py), a namespace tool
(flattened for Gemini, restored on the way back), and every recording in the three dialects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from interop.test_codex_shaped_request import FIRST_TURN, codex_body
from providers.gemini.conftest import API_KEY, CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini, sse_body
from respstream.cli import main as respstream_cli
from respstream.server.config import Config
from respstream.server.http.app import create_app

SIGNATURE = "Q2FsY3VsYXRvclNpZ25hdHVyZQ=="


def _gateway(url: str, dialect: str = "openai", tools: list[str] | None = None) -> ServerThread:
    config = Config(dialect=dialect, upstreams=[f"gemini+{url}"],
                    upstream_options={"api_key": API_KEY, "retries": 0, "models": ["gemini-2.5-flash"]},
                    tools={"enabled": tools or []}, rewrite={"steps": []})
    return ServerThread(create_app(config))


@pytest.fixture(scope="module")
def with_calculator(simulated: tuple[SimulatedGemini, ServerThread]) -> Iterator[ServerThread]:
    with _gateway(simulated[1].url, tools=["calculator"]) as server:
        yield server


def _text_reply(text: str) -> Reply:
    return Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                                "finishReason": "STOP"}]}))


def test_a_server_tool_round_sends_the_calls_signature_back(fake: SimulatedGemini,
                                                            with_calculator: ServerThread) -> None:
    fake.queue(Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "calculator", "args": {"expression": "6*7"}}, "thoughtSignature": SIGNATURE}]},
        "finishReason": "STOP"}]})), _text_reply("6*7 is 42."))
    answer = httpx.post(f"{with_calculator.base_url}/responses", json={
        "model": "gemini-2.5-flash", "input": "What is 6*7?", "tools": [{"type": "calculator"}], "stream": False},
        timeout=30)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["status"] == "completed" and result["output_text"] == "6*7 is 42."
    assert fake.invalid == [] and len(fake.requests) == 2
    first, second = fake.requests[0][1], fake.requests[1][1]
    assert "calculator" in json.dumps(first["tools"])
    model_turn, results = second["contents"][1], second["contents"][2]
    assert model_turn == {"role": "model", "parts": [{"functionCall": {"name": "calculator",
                                                                       "args": {"expression": "6*7"}},
                                                      "thoughtSignature": SIGNATURE}]}
    response = results["parts"][0]["functionResponse"]
    assert response["name"] == "calculator" and "42" in json.dumps(response["response"])


def test_a_namespace_tool_is_flattened_for_gemini_and_restored(fake: SimulatedGemini, gateway: ServerThread) -> None:
    fake.queue(Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "crm__find_customer", "args": {"email": "a@b.c"}, "id": "c1"}}]},
        "finishReason": "STOP"}]})))
    tools = [{"type": "namespace", "name": "crm", "description": "Customer records", "tools": [
        {"type": "function", "name": "find_customer", "description": "Find one", "parameters": {
            "type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}}]}]
    answer = httpx.post(f"{gateway.base_url}/responses", json={
        "model": "gemini-2.5-flash", "input": "Who is a@b.c?", "tools": tools, "stream": False}, timeout=30)
    assert answer.status_code == 200, answer.text
    call = next(i for i in answer.json()["output"] if i["type"] == "function_call")
    assert (call.get("namespace"), call["name"], call["call_id"]) == ("crm", "find_customer", "c1")
    declared = fake.requests[-1][1]["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declared] == ["crm__find_customer"]


DIALECT_CASES = [(c, d) for c in CASES if c["http_status"] == 200 for d in ("platform", "openresponses")]


@pytest.fixture(scope="module")
def dialect_gateways(simulated: tuple[SimulatedGemini, ServerThread]) -> Iterator[dict[str, ServerThread]]:
    started: dict[str, ServerThread] = {}
    try:
        for dialect in ("platform", "openresponses"):
            started[dialect] = _gateway(simulated[1].url, dialect=dialect).__enter__()
        yield started
    finally:
        for server in started.values():
            server.__exit__(None, None, None)


@pytest.mark.parametrize(("case", "dialect"), DIALECT_CASES, ids=[f"{c['case']}-{d}" for c, d in DIALECT_CASES])
def test_every_recording_in_the_other_dialects(case: dict[str, Any], dialect: str, fake: SimulatedGemini,
                                               dialect_gateways: dict[str, ServerThread], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    fake.queue(Reply(200, (PROVIDERS / case["file"]).read_bytes()))
    request: dict[str, Any] = {"model": "gemini-2.5-flash", "input": case["request"]["input"], "stream": True}
    if case["request"]["tools"]:
        request["tools"] = case["request"]["tools"]
    answer = httpx.post(f"{dialect_gateways[dialect].base_url}/responses", json=request, timeout=30)
    assert answer.status_code == 200, answer.text
    path = tmp_path / "client.sse"
    path.write_bytes(answer.content)
    capsys.readouterr()
    respstream_cli(["replay", "--json", "--strict", str(path)])
    got = json.loads(capsys.readouterr().out)
    assert got["violations"] == []
    expect = case["expect"]
    if expect["output_text"] is None:  # cut: a failure terminal in every dialect
        assert got["status"] in ("failed", "error") and "cut" in got["error"]["message"]
        return
    assert got["status"] == expect["status"]
    assert got["output_text"] == expect["output_text"]
    assert [c["name"] for c in got["tool_calls"]] == [c["name"] for c in expect["tool_calls"]]


def test_a_codex_shaped_session_against_gemini(fake: SimulatedGemini, gateway: ServerThread) -> None:
    """Codex CLI's request shape (tests/interop/test_codex_shaped_request.py: store false with the whole history,
    namespace, custom and hosted tools, text.verbosity, service_tier priority, include encrypted reasoning) is
    taken, and its second turn, the history replayed, returns the shell call's signature on that call."""
    fake.queue(Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "exec_command", "args": {"cmd": "ls"}}, "thoughtSignature": SIGNATURE}]},
        "finishReason": "STOP"}]})), _text_reply("Two files."))
    first = httpx.post(f"{gateway.base_url}/responses", json={**codex_body(FIRST_TURN), "model": "gemini-2.5-flash",
                                                              "stream": False}, timeout=30)
    assert first.status_code == 200, first.text
    output = first.json()["output"]
    call = next(i for i in output if i["type"] == "function_call")
    history = [*FIRST_TURN, *output, {"type": "function_call_output", "call_id": call["call_id"], "output": "a b"}]
    second = httpx.post(f"{gateway.base_url}/responses", json={**codex_body(history), "model": "gemini-2.5-flash",
                                                               "stream": False}, timeout=30)
    assert second.status_code == 200, second.text
    assert second.json()["output_text"] == "Two files."
    sent = fake.requests[-1][1]
    assert sent["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "exec_command", "args": {"cmd": "ls"}}, "thoughtSignature": SIGNATURE}]}
    assert sent["systemInstruction"]["parts"][-1] == {"text": "Answer concisely: keep explanations short."}
    names = [d["name"] for d in sent["tools"][0]["functionDeclarations"]]
    assert {"exec_command", "multi_agent__spawn_agent", "apply_patch"} <= set(names)
    assert fake.invalid == []
