"""Remote MCP tools end to end: the gateway (SIMULATED scripted upstream that calls the tools) talks to a real MCP
server built with the official `mcp` SDK on loopback; clients are raw HTTP and the official openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from fakes.mcp_server import TestMcpServer
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app

LOOPBACK = {"fetch_allow": ["127.0.0.0/8"]}


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[tuple[TestMcpServer, str]]:
    server = TestMcpServer()
    with ServerThread(server) as srv:
        yield server, f"{srv.url}/mcp"


def _gateway(tools: dict[str, Any] | None = LOOPBACK, dialect: str = "openai") -> ServerThread:
    upstreams = {
        "adder": ScriptedUpstream(4, name="adder", models=["adder"], tool="add"),
        "failer": ScriptedUpstream(4, name="failer", models=["failer"], tool="fail"),
        "chain": ScriptedUpstream(4, name="chain", models=["chain"], tool="add,get_weather"),
    }
    return ServerThread(make_app(dialect=dialect, upstreams=upstreams, tools=tools or {}))


@pytest.fixture(scope="module", params=["openai", "openresponses"])
def gateway(request: pytest.FixtureRequest) -> Iterator[ServerThread]:
    with _gateway(dialect=request.param) as srv:
        yield srv


def _mcp(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "calc", "server_url": url, **extra}


def _stream(base: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{base}/responses", json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200, r.read()
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


def test_mcp_call_without_approval(gateway: ServerThread, mcp_server: tuple[TestMcpServer, str]) -> None:
    server, url = mcp_server
    before = len(server.calls)
    events = _stream(gateway.base_url, {"model": "adder", "input": "add please",
                                        "tools": [_mcp(url, require_approval="never", headers={"X-Token": "t1"})]})
    types = [e["type"] for e in events]
    for expected in ("response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
                     "response.mcp_call.in_progress", "response.mcp_call_arguments.done",
                     "response.mcp_call.completed"):
        assert expected in types, types
    final = events[-1]["response"]
    assert final["status"] == "completed"
    kinds = [item["type"] for item in final["output"]]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"]
    listed, call = final["output"][0], final["output"][1]
    assert {t["name"] for t in listed["tools"]} == {"add", "echo", "fail"} and listed["server_label"] == "calc"
    assert call["name"] == "add" and call["status"] == "completed" and call["error"] is None
    args = json.loads(call["arguments"])
    assert call["output"] == str(args["a"] + args["b"])  # the real server computed it
    assert server.calls[before:] == [("add", args)]
    assert any(h.get("x-token") == "t1" for h in server.headers)


def test_allowed_tools_filters(gateway: ServerThread, mcp_server: tuple[TestMcpServer, str]) -> None:
    _, url = mcp_server
    events = _stream(gateway.base_url, {"model": "adder", "input": "x",
                                        "tools": [_mcp(url, allowed_tools=["echo"], require_approval="never")]})
    final = events[-1]["response"]
    assert [t["name"] for t in final["output"][0]["tools"]] == ["echo"]
    assert [i["type"] for i in final["output"]] == ["mcp_list_tools", "message"]  # add was not offered


def test_a_failing_tool_is_reported_and_the_model_goes_on(gateway: ServerThread,
                                                          mcp_server: tuple[TestMcpServer, str]) -> None:
    _, url = mcp_server
    events = _stream(gateway.base_url, {"model": "failer", "input": "x",
                                        "tools": [_mcp(url, require_approval="never")]})
    assert "response.mcp_call.failed" in [e["type"] for e in events]
    final = events[-1]["response"]
    call = final["output"][1]
    assert call["status"] == "failed" and "always fails" in call["error"] and call["output"] is None
    assert final["status"] == "completed"


def test_approval_request_then_approve_or_deny(mcp_server: tuple[TestMcpServer, str]) -> None:
    server, url = mcp_server
    with _gateway() as gw, OpenAI(base_url=gw.base_url, api_key="x", max_retries=0) as sdk:
        tools: Any = [_mcp(url)]  # require_approval defaults to "always"
        first = sdk.responses.create(model="adder", input="add", tools=tools)
        assert [i.type for i in first.output] == ["mcp_list_tools", "mcp_approval_request"]
        request = first.output[1]
        assert request.name == "add" and request.server_label == "calc"  # type: ignore[union-attr]
        before = len(server.calls)
        approved = sdk.responses.create(model="adder", tools=tools, previous_response_id=first.id, input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}])
        calls = [i for i in approved.output if i.type == "mcp_call"]
        assert len(calls) == 1 and calls[0].approval_request_id == request.id  # type: ignore[union-attr]
        assert calls[0].output and len(server.calls) == before + 1  # type: ignore[union-attr]
        assert approved.output[-1].type == "message"
        denied = sdk.responses.create(model="adder", tools=tools, previous_response_id=first.id, input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}])
        assert "mcp_call" not in [i.type for i in denied.output] and len(server.calls) == before + 1
        missing = httpx.post(f"{gw.base_url}/responses", json={"model": "adder", "tools": tools, "stream": False,
                                                                "previous_response_id": first.id, "input": [
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_nope", "approve": True}]})
        assert missing.status_code == 400 and "mcpr_nope" in missing.json()["error"]["message"]


def test_per_tool_approval_rules(mcp_server: tuple[TestMcpServer, str]) -> None:
    _, url = mcp_server
    with _gateway() as gw, OpenAI(base_url=gw.base_url, api_key="x", max_retries=0) as sdk:
        never_add: Any = [_mcp(url, require_approval={"never": {"tool_names": ["add"]}})]
        assert [i.type for i in sdk.responses.create(model="adder", input="x", tools=never_add).output] == [
            "mcp_list_tools", "mcp_call", "message"]
        always_add: Any = [_mcp(url, require_approval={"always": {"tool_names": ["add"]}, "never": {
            "tool_names": ["echo"]}})]
        assert sdk.responses.create(model="adder", input="x", tools=always_add).output[-1].type == \
            "mcp_approval_request"


def test_loopback_servers_are_refused_unless_allowed(mcp_server: tuple[TestMcpServer, str]) -> None:
    server, url = mcp_server
    before = len(server.headers)
    with _gateway(tools={}) as gw:
        events = _stream(gw.base_url, {"model": "adder", "input": "x", "tools": [_mcp(url)]})
    assert "response.mcp_list_tools.failed" in [e["type"] for e in events]
    assert events[-1]["type"] == "response.failed"
    error = events[-1]["response"]["error"]
    assert error["code"] == "tool_error" and "fetch_allow" in error["message"]
    assert len(server.headers) == before  # nothing was sent to the refused address


def test_unreachable_server_fails_the_response_clearly() -> None:
    with _gateway() as gw:
        events = _stream(gw.base_url, {"model": "adder", "input": "x",
                                       "tools": [_mcp("http://127.0.0.1:9/mcp", require_approval="never")]})
    assert events[-1]["type"] == "response.failed"
    assert "calc" in events[-1]["response"]["error"]["message"]


@pytest.mark.parametrize(("tool", "param"), [
    ({"type": "mcp", "server_url": "http://127.0.0.1:1/mcp"}, "tools[0].server_label"),
    ({"type": "mcp", "server_label": "x"}, "tools[0].server_url"),
    ({"type": "mcp", "server_label": "x", "server_url": "ftp://h/x"}, "tools[0].server_url"),
    ({"type": "mcp", "server_label": "x", "connector_id": "c"}, "tools[0].connector_id"),
    ({"type": "mcp", "server_label": "x", "server_url": "http://h/", "require_approval": "sometimes"},
     "tools[0].require_approval"),
    ({"type": "mcp", "server_label": "x", "server_url": "http://h/", "allowed_tools": "add"},
     "tools[0].allowed_tools"),
    ({"type": "mcp", "server_label": "x", "server_url": "http://h/", "headers": {"a": 1}}, "tools[0].headers"),
])
def test_bad_mcp_tools_are_400(gateway: ServerThread, tool: dict[str, Any], param: str) -> None:
    r = httpx.post(f"{gateway.base_url}/responses", json={"input": "x", "tools": [tool], "stream": False})
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
