"""A fake gateway for the playground's browser tests (simulated: no real upstream, no pipeline).

It serves the real static playground and streams a scripted event list that the test sets on the app.
A background response is "generated" on a clock: event i becomes available at created + i * delay, whether or
not anyone is connected, so a resume after a disconnect sees the same events the POST would have sent.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import respstream

STATIC = Path(respstream.__file__).parent / "server" / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


@dataclass
class Script:
    """What the next POST streams."""

    chunks: list[str] = field(default_factory=lambda: ["Hello", ", ", "world", "."])
    delay_ms: float = 0
    dialect: str = "platform"  # "platform": event: message; "openai": event: <type>
    routing: dict[str, Any] | None = None
    tool: dict[str, Any] | None = None  # {"name", "arguments", "output"}
    fail_after: int | None = None  # error event after this many text deltas
    error_code: str = "upstream_error"
    final_text: str | None = None  # a rewrite: output_text.done carries this instead of the deltas
    reasoning: str | None = None
    extra: list[dict[str, Any]] = field(default_factory=list)  # appended after the terminal (a violation)
    wire: list[int] | None = None  # send events in this order (repeat or skip numbers to inject violations)
    # An HTTP error instead of a stream: (status, code, extra headers).
    http_error: tuple[int, str, dict[str, str]] | None = None
    search: list[dict[str, str]] | None = None  # a web_search call with these results before the answer
    citations: list[dict[str, Any]] | None = None  # url_citation annotations on the answer


def build_events(script: Script, response_id: str, model: str) -> list[dict[str, Any]]:
    """The full event list (sequence numbers added by the caller's order)."""
    created = int(time.time() * 1000)
    base = {"id": response_id, "object": "response", "created_at": created, "model": model}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {**base, "status": "in_progress"}}]
    if script.routing is not None:
        events.append({"type": "response.routing.completed", **script.routing})
    oi = 0
    if script.reasoning is not None:
        rid = f"rs_{oi}"
        events += [
            {"type": "response.output_item.added", "output_index": oi, "item": {"id": rid, "type": "reasoning"}},
            {"type": "response.reasoning_text.delta", "item_id": rid, "output_index": oi, "content_index": 0,
             "delta": script.reasoning},
            {"type": "response.output_item.done", "output_index": oi, "item": {"id": rid, "type": "reasoning"}},
        ]
        oi += 1
    if script.tool is not None:
        args = script.tool["arguments"]
        item = {"id": f"fc_{oi}", "type": "function_call", "name": script.tool["name"], "call_id": "call_1",
                "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": oi, "item": item})
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            events.append({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                           "output_index": oi, "delta": piece})
        events.append({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": oi,
                       "arguments": args})
        done = {**item, "arguments": args, "output": script.tool["output"], "status": "completed"}
        events.append({"type": "response.output_item.done", "output_index": oi, "item": done})
        oi += 1
    if script.search is not None:
        wid = f"ws_{oi}"
        output = json.dumps(script.search)
        events += [
            {"type": "response.output_item.added", "output_index": oi,
             "item": {"id": wid, "type": "web_search_call", "status": "in_progress",
                      "action": {"type": "search", "query": "q"}}},
            {"type": "response.web_search_call.completed", "item_id": wid, "output_index": oi},
            {"type": "response.output_item.done", "output_index": oi,
             "item": {"id": wid, "type": "web_search_call", "status": "completed",
                      "action": {"type": "search", "query": "q"}, "output": output}},
        ]
        oi += 1
    mid = f"msg_{oi}"
    loc = {"item_id": mid, "output_index": oi, "content_index": 0}
    events.append({"type": "response.output_item.added", "output_index": oi,
                   "item": {"id": mid, "type": "message", "role": "assistant", "status": "in_progress",
                            "content": []}})
    events.append({"type": "response.content_part.added", **loc, "part": {"type": "output_text", "text": ""}})
    for i, chunk in enumerate(script.chunks):
        if script.fail_after is not None and i == script.fail_after:
            events.append({"type": "error", "code": script.error_code, "message": "Unexpected upstream failure"})
            return events
        events.append({"type": "response.output_text.delta", **loc, "delta": chunk})
    text = "".join(script.chunks)
    if script.final_text is not None:
        events.append({"type": "response.rewrite.in_progress"})
        text = script.final_text
    for n, annotation in enumerate(script.citations or []):
        events.append({"type": "response.output_text.annotation.added", **loc, "annotation_index": n,
                       "annotation": annotation})
    part = {"type": "output_text", "text": text, "annotations": script.citations or []}
    events.append({"type": "response.output_text.done", **loc, "text": text})
    events.append({"type": "response.content_part.done", **loc, "part": part})
    message = {"id": mid, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
    events.append({"type": "response.output_item.done", "output_index": oi, "item": message})
    usage = {"input_tokens": 12, "output_tokens": len(script.chunks), "total_tokens": 12 + len(script.chunks)}
    events.append({"type": "response.completed",
                   "response": {**base, "status": "completed", "output_text": text, "usage": usage}})
    return events


@dataclass
class Stored:
    events: list[dict[str, Any]]
    started: float
    delay: float
    dialect: str
    wire: list[int] | None = None


class FakeGateway:
    """Holds the script for the next request and the stored (background) responses."""

    def __init__(self) -> None:
        self.script = Script()
        self.responses: dict[str, Stored] = {}
        self.requests: list[dict[str, Any]] = []
        self.app = Starlette(routes=[
            Route("/", self.index),
            Route("/favicon.ico", self.favicon),
            Route("/healthz", self.healthz),
            Route("/v1/models", self.models),
            Route("/v1/responses", self.create, methods=["POST"]),
            Route("/v1/responses/{rid}", self.retrieve),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        ])

    async def index(self, request: Request) -> Response:
        # ?csp=1: the strict policy a hardened gateway sends (no inline script or style, no eval). Not by default:
        # Playwright's wait_for_function evaluates its predicate with eval in the page, which that policy forbids.
        headers = {"Content-Security-Policy": CSP} if request.query_params.get("csp") else {}
        return FileResponse(STATIC / "index.html", headers=headers)

    async def favicon(self, request: Request) -> Response:
        return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon")

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "dialect": "fake"})

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": "fake-small", "object": "model", "input_modalities": ["text"]},
            {"id": "fake-large", "object": "model", "input_modalities": ["text", "image"]}]})

    async def create(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        script = self.script
        if script.http_error is not None:
            status, code, headers = script.http_error
            return JSONResponse({"error": {"type": "invalid_request_error", "code": code, "param": None,
                                           "message": f"simulated {status} {code}"}},
                                status_code=status, headers=headers)
        rid = str(uuid.uuid4())
        model = body.get("model") or "auto"
        events = build_events(script, rid, "fake-small" if model == "auto" else model) + script.extra
        stored = Stored(events, time.monotonic(),
                        script.delay_ms / 1000, script.dialect, script.wire)
        self.responses[rid] = stored
        return self._stream(stored, 0)

    async def retrieve(self, request: Request) -> Response:
        stored = self.responses.get(request.path_params["rid"])
        if stored is None:
            return JSONResponse({"error": {"type": "invalid_request_error", "code": "not_found", "message": "no such"}},
                                status_code=404)
        after = int(request.query_params.get("starting_after", request.headers.get("last-event-id", "-1")))
        if after + 1 >= len(stored.events):
            return Response(status_code=204)
        return self._stream(stored, after + 1)

    def _stream(self, stored: Stored, start: int) -> StreamingResponse:
        order = stored.wire if stored.wire is not None else list(range(len(stored.events)))

        async def body() -> AsyncIterator[bytes]:
            for n, seq in enumerate(order):
                if seq < start:
                    continue
                due = stored.started + n * stored.delay
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                event = {**stored.events[seq], "sequence_number": seq}
                name = "message" if stored.dialect == "platform" else event["type"]
                data = json.dumps(event, separators=(",", ":"))
                yield f"event: {name}\nid: {seq}\ndata: {data}\n\n".encode()

        return StreamingResponse(body(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
