"""A request with client function tools is an agent's turn (issue 31, item 3): the default (`platform`) dialect
must not run the retrieval route's web search first (29-53 s a request with the embedded model) and put a server
tool item in front of the client's call; and a server tool item it does show says it ran on the server
(``server_tool: true``), so a client that runs every ``function_call`` can tell it from its own.

A real gateway (real Router and ToolRegistry: the local search index) with the SIMULATED scripted upstream, which
calls the client tool ``lookup`` when offered, over loopback.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.routing.router import Router
from respstream.server.tools.registry import ToolRegistry
from respstream.server.upstream.base import Chunk, GenerationRequest
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import FakeRewriter, ServerThread, post_stream

LOOKUP = {"type": "function", "name": "lookup", "description": "Look something up in the caller's own system.",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
FRESH = "What is the latest news about respstream today?"  # the retrieval route: "latest", "news", "today"


class RecordingUpstream(ScriptedUpstream):
    """The SIMULATED scripted model, keeping the messages of every generation request it gets."""

    seen: list[list[dict[str, Any]]] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        self.seen.append([dict(m) for m in request.messages])
        async for chunk in super().generate(request):
            yield chunk


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    upstream = RecordingUpstream(4, name="scripted", models=["scripted-a"], tool="lookup")
    comps = Components(router=Router([upstream]), tools=ToolRegistry(), rewriter=FakeRewriter())
    with ServerThread(create_app(Config(dialect="platform", upstreams=["scripted:4"]), comps)) as srv:
        yield srv.url


def _items(payloads: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [p["item"] for p in payloads if p["type"] == event]


def test_a_client_tool_turn_runs_no_search_first(gateway: str) -> None:
    got = post_stream(gateway, {"input": FRESH, "tools": [LOOKUP, {"type": "web_search"}]}, dialect="platform")
    assert got.violations == []
    routing = [p for p in got.payloads() if p["type"] == "response.routing.completed"]
    assert routing and routing[0]["category"] == "retrieval"
    done = _items(got.payloads(), "response.output_item.done")
    assert [(i["type"], i.get("name")) for i in done] == [("function_call", "lookup")]  # no web_search before it
    assert "server_tool" not in done[0]  # the client's own call: the client runs it


def test_without_client_tools_the_search_runs_and_says_it_ran_on_the_server(gateway: str) -> None:
    got = post_stream(gateway, {"input": FRESH, "tools": [{"type": "web_search"}]}, dialect="platform")
    assert got.violations == []
    added = _items(got.payloads(), "response.output_item.added")
    done = _items(got.payloads(), "response.output_item.done")
    search_added = [i for i in added if i.get("name") == "web_search"]
    search_done = [i for i in done if i.get("name") == "web_search"]
    assert search_added and search_done
    # DESIGN §4: the seed's shape (a function_call whose done carries output and status), marked from the start.
    assert search_added[0]["type"] == "function_call" and search_added[0]["server_tool"] is True
    assert search_done[0]["server_tool"] is True and search_done[0]["status"] in ("completed", "failed")
    assert "output" in search_done[0]


def test_a_computed_fact_is_still_given_on_a_client_tool_turn(gateway: str) -> None:
    got = post_stream(gateway, {"input": "What is 17 * 23?", "tools": [LOOKUP, {"type": "calculator"}]},
                      dialect="platform")
    done = _items(got.payloads(), "response.output_item.done")
    names = [i.get("name") for i in done if i["type"] == "function_call"]
    assert names[0] == "calculator" and done[0]["server_tool"] is True and done[0]["output"] == "391"


def test_a_server_tool_item_echoed_back_carries_its_result(gateway: str) -> None:
    # An SDK-style client sends the previous output back as input: the server tool's result travels in the item
    # (there is no function_call_output for it), and the model must see it as a tool result.
    first = post_stream(gateway, {"input": "What is 17 * 23?", "tools": [{"type": "calculator"}]}, dialect="platform")
    echoed = [i for i in first.core.result.output if i.get("type") == "function_call"]
    assert echoed and echoed[0]["server_tool"] is True
    follow = post_stream(gateway, {"input": [*echoed, {"type": "message", "role": "user", "content": "thanks"}]},
                         dialect="platform")
    assert follow.status_code == 200 and follow.violations == []
    assert follow.core.result.status == "completed"
    tool_results = [m for m in RecordingUpstream.seen[-1] if m.get("role") == "tool"]
    assert [m["content"] for m in tool_results] == ["391"]
