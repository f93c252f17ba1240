"""Steering a response while a server (hosted) tool runs: the tool's work is finished first (its item done with its
output), then the response ends ``incomplete`` (steered) and the successor starts. The tool is a SIMULATED slow
calculator; the upstream the SIMULATED scripted one; gateway, uvicorn and the socket are real."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import connect

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import FakeRewriter, FakeRouter, FakeToolResult, FakeTools, ServerThread
from .test_websocket_lanes import TERMINALS, recv, send, until_terminal, ws_url


class SlowTools(FakeTools):
    """SIMULATED server tools whose calculator takes ``seconds`` (and says when it started)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ran = 0

    async def run(self, name: str, arguments_json: str) -> FakeToolResult:
        self.ran += 1
        await asyncio.sleep(self.seconds)
        return await super().run(name, arguments_json)


@pytest.fixture(scope="module", params=["platform", "openai"])
def tool_gateway(request: pytest.FixtureRequest) -> Iterator[tuple[ServerThread, SlowTools, dict[str, Any]]]:
    tools = SlowTools(0.6)
    # platform: server tools run unlisted (the calculator); openai: a hosted tool must be listed (web_search)
    tool = "calculator" if request.param == "platform" else "web_search"
    upstreams = {"calc": ScriptedUpstream(8, name="calc", models=["calc"], tool=tool, delay_ms=5)}
    comps = Components(router=FakeRouter(upstreams), tools=tools, rewriter=FakeRewriter())
    app = create_app(Config(dialect=request.param, upstreams=["scripted:8"]), comps)
    listed = {} if request.param == "platform" else {"tools": [{"type": "web_search"}]}
    with ServerThread(app, ws="websockets-sansio") as srv:
        yield srv, tools, listed


def test_a_steer_during_a_hosted_tool_lets_the_tool_finish(
        tool_gateway: tuple[ServerThread, SlowTools, dict[str, Any]]) -> None:
    srv, tools, listed = tool_gateway
    with connect(ws_url(srv)) as ws:
        send(ws, type="response.create", model="calc", input="what is 2+2?", **listed)
        events = []
        while not any(e["type"] == "response.output_item.added" for e in events):
            events.append(recv(ws))  # the tool call's item: the tool is running now
        rid = events[0]["response"]["id"]
        send(ws, type="response.steer", previous_response_id=rid, input="Answer in French.")
        while events[-1]["type"] not in TERMINALS:
            events.append(recv(ws))
        successor = until_terminal(ws)
    end = events[-1]["response"]
    assert end["status"] == "incomplete" and end["incomplete_details"] == {"reason": "steered"}, end
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done and done[0]["status"] == "completed" and done[0]["type"] != "message"  # the tool finished
    assert tools.ran >= 1
    assert successor[-1]["type"] == "response.completed"
    assert successor[-1]["response"]["previous_response_id"] == rid
