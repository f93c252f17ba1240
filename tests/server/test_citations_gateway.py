"""web_search answers cite their results: url_citation annotations on the answer, end to end over loopback.

The REAL Router, ToolRegistry (searxng provider) and gateway; the search backend is a SIMULATED SearxNG on loopback
(the internet is the boundary we cannot reach) and the model is the SIMULATED scripted upstream answering a fixed
text that cites the results the way the prompt asks ([n] markers), by title and by URL. Clients: our StreamCore
(rules + assembler, every dialect), GET /v1/responses/{id}, and the official openai SDK (typed AnnotationURLCitation).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from openai import OpenAI
from openai.types.responses import ResponseOutputTextAnnotationAddedEvent
from openai.types.responses.response_output_text import AnnotationURLCitation
from openai.types.responses.response_output_text_annotation_added_event import (
    AnnotationURLCitation as EventURLCitation,  # the SDK types the event's annotation with its own class
)

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.routing.router import Router
from respstream.server.tools.registry import ToolRegistry
from respstream.server.upstream.base import Chunk, GenerationRequest
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import Decoded, FakeRewriter, ServerThread, post_stream

RESULTS = [
    {"title": "Server-sent events - HTML Standard",
     "url": "https://html.spec.whatwg.org/multipage/server-sent-events.html", "content": "The EventSource interface."},
    {"title": "Using server-sent events", "url": "https://developer.mozilla.org/docs/Web/API/Server-sent_events",
     "content": "Developing a web application that uses server-sent events is straightforward."},
]
ANSWER = ("Server-sent events stream over one HTTP response [1]. The guide Using server-sent events covers "
          "EventSource; see https://developer.mozilla.org/docs/Web/API/Server-sent_events.")
QUESTION = "What is the latest news about server-sent events?"  # "latest": the retrieval route searches first
CITED = [("[1]", RESULTS[0]["url"]), ("Using server-sent events", RESULTS[1]["url"]), (RESULTS[1]["url"],
                                                                                        RESULTS[1]["url"])]


async def simulated_searxng(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """SIMULATED SearxNG: GET /search?q=...&format=json -> the fixed RESULTS."""
    assert scope["type"] == "http"
    query = parse_qs(scope.get("query_string", b"").decode())
    ok = scope["path"] == "/search" and query.get("format") == ["json"] and bool(query.get("q"))
    body = json.dumps({"results": RESULTS}).encode() if ok else b"{}"
    await send({"type": "http.response.start", "status": 200 if ok else 400,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


class RecordingUpstream(ScriptedUpstream):
    """The SIMULATED scripted model (a fixed answer), keeping the messages of every generation request."""

    def __init__(self, *, tool: str | None = None, models: list[str] | None = None, text: str = ANSWER) -> None:
        super().__init__(0, name=f"rec-{tool}", models=models or ["scripted-a"], text=text, tool=tool)
        self.seen: list[list[dict[str, Any]]] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        self.seen.append([dict(m) for m in request.messages])
        async for chunk in super().generate(request):
            yield chunk


@pytest.fixture(scope="module")
def search_url() -> Iterator[str]:
    with ServerThread(simulated_searxng, lifespan="off") as srv:
        yield srv.url


def gateway(search_url: str, dialect: str, *, rewriter: FakeRewriter | None = None) -> tuple[Any, RecordingUpstream,
                                                                                              RecordingUpstream]:
    grounded = RecordingUpstream()
    calling = RecordingUpstream(tool="web_search", models=["caller"])
    tools = ToolRegistry({"search_provider": "searxng", "searxng_url": search_url})
    cfg = Config(dialect=dialect, upstreams=["scripted:4"])
    comps = Components(router=Router([grounded, calling]), tools=tools, rewriter=rewriter or FakeRewriter())
    return create_app(cfg, comps), grounded, calling


def message_part(output: list[dict[str, Any]]) -> dict[str, Any]:
    message = next(item for item in output if item["type"] == "message")
    part: dict[str, Any] = message["content"][0]
    return part


def cited(part: dict[str, Any]) -> list[tuple[str, str]]:
    text = part["text"]
    return [(text[a["start_index"]:a["end_index"]], a["url"]) for a in part["annotations"]]


def assert_cited_stream(got: Decoded, text: str) -> None:
    assert got.status_code == 200 and got.violations == [], got.violations
    payloads = got.payloads()
    types = [p["type"] for p in payloads]
    added = [p for p in payloads if p["type"] == "response.output_text.annotation.added"]
    assert [a["annotation_index"] for a in added] == [0, 1, 2]
    done_at = types.index("response.output_text.done")
    assert all(types.index("response.output_text.annotation.added") < done_at for _ in added)
    assert all(p["sequence_number"] < payloads[done_at]["sequence_number"] for p in added)
    message_id = next(p["item"]["id"] for p in payloads if p["type"] == "response.output_item.added"
                      and p["item"]["type"] == "message")
    assert {(a["item_id"], a["output_index"], a["content_index"]) for a in added} == {
        (message_id, payloads[done_at]["output_index"], 0)}
    annotations = [a["annotation"] for a in added]
    for a in annotations:
        assert set(a) == {"type", "url", "title", "start_index", "end_index"} and a["type"] == "url_citation"
        assert a["title"] == next(r["title"] for r in RESULTS if r["url"] == a["url"])
    assert payloads[done_at]["text"] == text
    part_done = next(p["part"] for p in payloads if p["type"] == "response.content_part.done")
    item_done = next(p["item"] for p in payloads if p["type"] == "response.output_item.done"
                     and p["item"]["type"] == "message")
    terminal = payloads[-1]["response"]
    for part in (part_done, item_done["content"][0], message_part(terminal["output"]), message_part(
            got.core.result.output)):
        assert part["annotations"] == annotations and part["text"] == text
    assert cited(part_done) == CITED


@pytest.mark.parametrize("dialect", ["platform", "openai", "openresponses"])
def test_grounded_search_answer_carries_url_citations(search_url: str, dialect: str) -> None:
    app, grounded, _ = gateway(search_url, dialect)
    with ServerThread(app) as srv:
        got = post_stream(srv.url, {"input": QUESTION, "tools": [{"type": "web_search"}]}, dialect=dialect)
        assert_cited_stream(got, ANSWER)
        # The model saw the results numbered, with the instruction to cite them as [n].
        note = next(m["content"] for m in grounded.seen[-1] if m["role"] == "system"
                    and "Web search results" in m["content"])
        assert f"[1] {RESULTS[0]['title']}\n    URL: {RESULTS[0]['url']}" in note
        assert f"[2] {RESULTS[1]['title']}" in note and "like [1]" in note
        # GET /v1/responses/{id} keeps them.
        rid = got.payloads()[-1]["response"]["id"]
        stored = httpx.get(f"{srv.url}/v1/responses/{rid}", timeout=10).json()
        assert cited(message_part(stored["output"])) == CITED


def test_citations_index_the_rewritten_text(search_url: str) -> None:
    rewriter = FakeRewriter({"Server-sent events stream": "SSE (server-sent events) streams"})
    app, _, _ = gateway(search_url, "openai", rewriter=rewriter)
    final = ANSWER.replace("Server-sent events stream", "SSE (server-sent events) streams")
    with ServerThread(app) as srv:
        got = post_stream(srv.url, {"input": QUESTION, "tools": [{"type": "web_search"}]}, dialect="openai")
    types = got.types
    assert types.index("respstream:response.rewrite.in_progress") < types.index(
        "response.output_text.annotation.added")
    assert_cited_stream(got, final)


def test_a_model_that_calls_web_search_itself_gets_numbered_results(search_url: str) -> None:
    app, _, calling = gateway(search_url, "openai")
    with ServerThread(app) as srv:
        got = post_stream(srv.url, {"model": "caller", "input": "server-sent events",
                                    "tools": [{"type": "web_search"}]}, dialect="openai")
    assert_cited_stream(got, ANSWER)
    tool_message = calling.seen[-1][-1]
    assert tool_message["role"] == "tool" and tool_message["content"].startswith(f"[1] {RESULTS[0]['title']}")


class SmallModel(RecordingUpstream):
    """The SIMULATED scripted model standing in for an embedded one: it cites nothing, and its upstream asks the
    gateway to list the sources (``list_sources``, the embedded models' default)."""

    list_sources = True


def test_an_answer_citing_nothing_gets_the_sources_listed(search_url: str) -> None:
    small = SmallModel(text="Server-sent events stream over HTTP.")
    tools = ToolRegistry({"search_provider": "searxng", "searxng_url": search_url})
    cfg = Config(dialect="openresponses", upstreams=["scripted:4"])
    app = create_app(cfg, Components(router=Router([small]), tools=tools, rewriter=FakeRewriter()))
    with ServerThread(app) as srv:
        got = post_stream(srv.url, {"input": QUESTION, "tools": [{"type": "web_search"}]}, dialect="openresponses")
    assert got.violations == [], got.violations
    final = f"Server-sent events stream over HTTP.\n\nSources: {RESULTS[0]['title']}; {RESULTS[1]['title']}"
    assert got.core.result.output_text == final
    assert "respstream:response.rewrite.in_progress" in got.types
    part = message_part(got.core.result.output)
    assert cited(part) == [(r["title"], r["url"]) for r in RESULTS]


def test_no_citation_without_a_search(search_url: str) -> None:
    app, _, _ = gateway(search_url, "openai")
    with ServerThread(app) as srv:
        got = post_stream(srv.url, {"model": "scripted-a", "input": "hello"}, dialect="openai")
    assert got.violations == []
    assert "response.output_text.annotation.added" not in got.types
    assert message_part(got.payloads()[-1]["response"]["output"])["annotations"] == []


# Open Responses: the search is a `respstream:web_search_call` extension item, which the SDK keeps but pydantic warns
# about when the SDK's stream helper re-serialises the Response; the message and its annotations parse typed.
@pytest.mark.parametrize("dialect", ["openai", pytest.param("openresponses", marks=pytest.mark.filterwarnings(
    "ignore:Pydantic serializer warnings:UserWarning"))])
def test_openai_sdk_parses_the_citations(search_url: str, dialect: str) -> None:
    app, _, _ = gateway(search_url, dialect)
    with ServerThread(app) as srv, OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=20) as sdk:
        tools: Any = [{"type": "web_search"}]
        with sdk.responses.stream(model="auto", input=QUESTION, tools=tools) as stream:
            events = [e for e in stream if isinstance(e, ResponseOutputTextAnnotationAddedEvent)]
            final = stream.get_final_response()
        assert [e.annotation_index for e in events] == [0, 1, 2]
        assert all(isinstance(e.annotation, EventURLCitation) for e in events)
        for response in (final, sdk.responses.retrieve(final.id)):
            message = next(item for item in response.output if item.type == "message")
            part = message.content[0]
            assert part.type == "output_text"
            annotations = part.annotations
            assert all(isinstance(a, AnnotationURLCitation) for a in annotations)
            assert [(part.text[a.start_index:a.end_index], a.url) for a in annotations  # type: ignore[union-attr]
                    ] == CITED
