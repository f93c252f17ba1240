"""Every recorded Anthropic stream (tests/data/providers/anthropic), replayed by the SIMULATED Anthropic provider in
random chunk sizes through the real gateway (``anthropic+http://`` upstream, ``openai`` dialect): the client's stream
has zero violations and shows the outcome expected.json gives (status and reason, text, calls, hosted tools,
reasoning with its signatures, usage, the provider's error type). Every request the adapter sent passes the official
SDK's request types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.server_thread import ServerThread

from .conftest import CASES, body_of, post
from .simulated_anthropic import Reply, SimulatedAnthropic


def request_of(case: dict[str, Any]) -> dict[str, Any]:
    given = case["request"]
    body: dict[str, Any] = {"model": case["model"], "input": given["input"]}
    if given["tools"]:
        body["tools"] = given["tools"]
    if given["max_output_tokens"] is not None:
        body["max_output_tokens"] = given["max_output_tokens"]
    if given["reasoning"]:
        body["reasoning"] = given["reasoning"]
        body["include"] = ["reasoning.encrypted_content"]
    return body


def reply_of(case: dict[str, Any], *, crlf: bool = False) -> Reply:
    body = body_of(case)
    if crlf and case["content_type"].startswith("text/event-stream"):
        body = body.replace(b"\n", b"\r\n")  # (JSON escapes its newlines: every LF here is framing)
    return Reply(body, status=case["http_status"], content_type=case["content_type"])


def reasoning_items(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in output if item.get("type") == "reasoning"]


def check_outcome(case: dict[str, Any], got: dict[str, Any]) -> None:
    want = case["expect"]
    status = "failed" if got["status"] == "error" else got["status"]  # (the platform dialect's failure terminal)
    assert status in want["status_any_of"], (status, got.get("error"))
    if want["incomplete_reason"] is not None:
        assert (got["incomplete_details"] or {}).get("reason") == want["incomplete_reason"]
    if want["output_text"] is not None and status != "failed":
        assert got["output_text"] == want["output_text"]
    if want["partial_text_before_failure"]:
        assert got["streamed_text"].startswith(want["partial_text_before_failure"]) or got["streamed_text"] == ""
    if want["error"] is not None:
        assert want["error"]["upstream_type"] in json.dumps(got["error"])
    if want["http_error"] is not None:
        assert got["error"] is not None and "prompt is too long" in got["error"]["message"]
    complete = [c for c in want["tool_calls"] if c["arguments_complete"]]
    calls = got["tool_calls"]
    if status in ("completed", "incomplete"):
        if want["tool_calls_optional"] and not complete:
            assert calls == [], "a call cut mid-arguments is never presented as a call to run"
        else:
            assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in calls] == [
                (c["call_id"], c["name"], c["arguments"]) for c in complete]
    searches = [i for i in got["output"] if i.get("type") in ("web_search_call", "openai:web_search_call")]
    assert [(s["id"] and True, s["action"]["query"]) for s in searches] == [
        (True, c["input"]["query"]) for c in want["server_tool_calls"]]
    assert not any(c["call_id"].startswith("srvtoolu_") for c in calls), "a server tool is never a client call"
    reasoning = reasoning_items(got["output"])
    expected = want["reasoning"]
    assert bool(reasoning) == expected["present"]
    summaries = "".join(p["text"] for item in reasoning for p in item.get("summary", []))
    assert summaries == expected["text"]
    assert expected["text"] not in got["output_text"] or not expected["text"]
    encrypted = [item.get("encrypted_content") for item in reasoning]
    assert encrypted == [s["value"] for s in expected["signatures"]] + [r["value"] for r in expected["redacted"]] \
        or encrypted == [r["value"] for r in expected["redacted"]] + [s["value"] for s in expected["signatures"]]
    usage = want["usage"]
    if usage is not None and status != "failed":
        assert got["usage"]["input_tokens"] == usage["input_tokens"]
        assert got["usage"]["output_tokens"] == usage["output_tokens"]
        assert got["usage"]["total_tokens"] == usage["total_tokens"]
        assert got["usage"]["input_tokens_details"]["cached_tokens"] == usage["cached_tokens"]


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_recording_through_the_gateway(gateway: ServerThread, sim: SimulatedAnthropic, name: str,
                                       crlf: bool) -> None:
    case = CASES[name]
    sim.replies.append(reply_of(case, crlf=crlf))
    if case["expect"]["error"] is not None and case["expect"]["partial_text_before_failure"] == "":
        sim.replies.append(reply_of(case, crlf=crlf))  # (an overloaded error before any output is retried once)
    got, violations, response = post(gateway, request_of(case))
    assert response.status_code == 200, response.text
    assert violations == []
    check_outcome(case, got)
    assert sim.problems == []
    sent = sim.requests[0]
    assert sent.headers["x-api-key"] == "sk-ant-test-key" and sent.headers["anthropic-version"]
    assert "authorization" not in sent.headers
    assert sent.body["model"] == case["model"] and sent.body["stream"] is True
    if case["request"]["max_output_tokens"] is not None:
        assert sent.body["max_tokens"] == case["request"]["max_output_tokens"]
    if case["request"]["reasoning"]:
        assert sent.body["thinking"]["type"] == "enabled" and sent.body["thinking"]["budget_tokens"] >= 1024
    assert "sk-ant-test-key" not in response.text


@pytest.mark.parametrize("name", sorted(CASES))
def test_recording_through_the_default_gateway(default_gateway: tuple[str, ServerThread], sim: SimulatedAnthropic,
                                               name: str) -> None:
    """As ``respstream serve --upstream anthropic+http://…`` runs (default tools, rewrite and retries), in each
    dialect: the same outcomes (Claude's text is passed as written: no clean-up rewrite)."""
    dialect, gateway = default_gateway
    case = CASES[name]
    sim.replies.extend([reply_of(case)] * 3)  # (an overloaded error before any output is retried)
    got, violations, response = post(gateway, request_of(case), dialect)
    assert response.status_code == 200, response.text
    assert violations == []
    check_outcome(case, got)
    assert sim.problems == []
