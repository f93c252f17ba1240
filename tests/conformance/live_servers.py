"""Test servers for the live conformance suite: a uvicorn thread helper and a FAKE Responses endpoint.

``FakeResponses`` is a small, simulated ``/v1/responses`` server (no model; canned text) that speaks the OpenAI
dialect correctly by default, including background runs with resume and cancel. Each ``defect`` breaks one thing on
purpose so the checker's verdicts can be tested:

- ``skip_sequence``: short-prompt streams skip sequence number 3 (-> ``plain`` reports ``violations``);
- ``no_terminal``: long-prompt foreground streams end without a terminal event (-> ``long_answer`` ``failed``);
- ``stall``: long-prompt foreground streams stop sending after a few deltas and hang (-> ``failed``, hang);
- ``bad_request_500``: invalid input gets a plain-text 500 (-> ``bad_request`` ``failed``);
- ``no_features``: tools and background are refused with 400 ``unsupported_parameter`` and any model is accepted
  (-> ``unsupported`` for the tool, background, cancel and unknown-model scenarios).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fakes.server_thread import ServerThread

__all__ = ["FakeResponses", "ServerThread"]

MODEL = "fake-model"
WORDS = ("Once", " upon", " a", " time", " there", " was", " a", " bicycle", " that", " rode", " far", " away", ".")


def _error(status: int, code: str, message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"detail": message,
         "error": {"type": "invalid_request_error", "code": code, "message": message, "param": param}},
        status_code=status,
    )


@dataclass
class _Log:
    """One response's event log; readers tail it."""

    response: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    cancelled: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, event: dict[str, Any]) -> None:
        event["sequence_number"] = len(self.events)
        self.events.append(event)
        self.changed.set()
        self.changed = asyncio.Event()


class FakeResponses:
    """A simulated Responses endpoint (see the module docstring). ``app`` is the Starlette application."""

    def __init__(self, *defects: str, deltas: int = 12, delay: float = 0.005, api_key: str | None = None) -> None:
        self.defects = set(defects)
        self.api_key = api_key
        self.deltas = deltas
        self.delay = delay
        self.logs: dict[str, _Log] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path?query) in arrival order
        self.app = Starlette(
            middleware=[Middleware(_Gate, fake=self)],
            routes=[
                Route("/v1/models", self.models),
                Route("/v1/responses", self.create, methods=["POST"]),
                Route("/v1/responses/{rid}", self.retrieve, methods=["GET"]),
                Route("/v1/responses/{rid}/cancel", self.cancel, methods=["POST"]),
            ]
        )

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def create(self, request: Request) -> Response:
        body = await request.json()
        text_input = body.get("input")
        if not isinstance(text_input, str | list):
            if "bad_request_500" in self.defects:
                return PlainTextResponse("Internal Server Error", status_code=500)
            return _error(400, "invalid_type", "'input' must be a string or a list of items", "input")
        no_features = "no_features" in self.defects
        if body.get("model") not in (None, MODEL) and not no_features:
            return _error(400, "model_not_found", f"unknown model {body['model']!r}; available: {MODEL}", "model")
        for name in ("tools", "background"):
            if body.get(name) and no_features:
                return _error(400, "unsupported_parameter", f"'{name}' is not supported", name)
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.logs:
            return _error(404, "not_found", f"response {previous!r} not found", "previous_response_id")
        wants_tool = any(t.get("name") == "get_weather" for t in body.get("tools") or [])
        answered = isinstance(text_input, list) and any(i.get("type") == "function_call_output" for i in text_input)
        long_prompt = isinstance(text_input, str) and "essay" in text_input
        rid = f"resp_{uuid.uuid4().hex}"
        log = _Log({"id": rid, "object": "response", "created_at": 1, "model": MODEL, "status": "in_progress",
                    "output": [], "background": bool(body.get("background"))})
        self.logs[rid] = log
        plan = _plan(log.response, self.deltas, tool=wants_tool and not answered)
        if body.get("background"):
            asyncio.get_running_loop().create_task(self._generate(log, plan))
            return StreamingResponse(self._tail(log, -1), media_type="text/event-stream")
        for event in plan:
            log.append(event)
        log.finished = True
        events = log.events
        if "skip_sequence" in self.defects and not long_prompt:
            events = [{**e, "sequence_number": e["sequence_number"] + (e["sequence_number"] >= 3)} for e in events]
        if long_prompt and "no_terminal" in self.defects:
            events = events[:-1]
        stall = long_prompt and "stall" in self.defects
        return StreamingResponse(self._frames(events, stall=stall), media_type="text/event-stream")

    async def _frames(self, events: list[dict[str, Any]], *, stall: bool) -> AsyncIterator[bytes]:
        for index, event in enumerate(events):
            if stall and index == 6:
                await asyncio.sleep(3600)  # the client's read timeout ends this
            yield _frame(event)

    async def _generate(self, log: _Log, plan: list[dict[str, Any]]) -> None:
        for event in plan[:-1]:
            if log.cancelled:
                break
            log.append(event)
            await asyncio.sleep(self.delay)
        if log.cancelled:
            log.response = {**log.response, "status": "cancelled"}
            log.append({"type": "response.failed", "response": log.response})
        else:
            log.response = plan[-1]["response"]
            log.append(plan[-1])
        log.finished = True
        log.changed.set()

    async def _tail(self, log: _Log, after: int) -> AsyncIterator[bytes]:
        cursor = after + 1
        while True:
            while cursor < len(log.events):
                yield _frame(log.events[cursor])
                cursor += 1
            if log.finished:
                return
            await log.changed.wait()

    async def retrieve(self, request: Request) -> Response:
        log = self.logs.get(request.path_params["rid"])
        if log is None:
            return _error(404, "not_found", "no such response")
        if request.query_params.get("stream") != "true":
            return JSONResponse(log.response)
        if not log.response.get("background"):
            return _error(400, "not_background", "only background responses can be streamed again")
        after = int(request.query_params.get("starting_after", "-1"))
        if log.finished and after >= len(log.events) - 1:
            return Response(status_code=204)
        return StreamingResponse(self._tail(log, after), media_type="text/event-stream")

    async def cancel(self, request: Request) -> Response:
        log = self.logs.get(request.path_params["rid"])
        if log is None:
            return _error(404, "not_found", "no such response")
        log.cancelled = True
        while not log.finished:
            await log.changed.wait()
        return JSONResponse(log.response)


class _Gate:
    """Records every request and, when the fake has an API key, demands it as a Bearer token (pure ASGI)."""

    def __init__(self, app: ASGIApp, fake: FakeResponses) -> None:
        self.app = app
        self.fake = fake

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = scope.get("query_string", b"").decode()
            self.fake.requests.append((scope["method"], scope["path"] + (f"?{query}" if query else "")))
            headers = dict(scope["headers"])
            if self.fake.api_key and headers.get(b"authorization") != f"Bearer {self.fake.api_key}".encode():
                await _error(401, "invalid_api_key", "missing or wrong API key")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _frame(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _plan(response: dict[str, Any], deltas: int, *, tool: bool) -> list[dict[str, Any]]:
    """The events of one response, without sequence numbers (the log assigns them)."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
    ]
    item: dict[str, Any]
    if tool:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "",
                "status": "in_progress"}
        pieces = ['{"city":', ' "Paris"}']
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events += [{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
                    "delta": p} for p in pieces]
        events.append({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0,
                       "arguments": "".join(pieces)})
        done = {**item, "arguments": "".join(pieces), "status": "completed"}
    else:
        text = "".join(WORDS[i % len(WORDS)] for i in range(deltas))
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
        where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events.append({"type": "response.content_part.added", **where, "part": {"type": "output_text", "text": ""}})
        events += [{"type": "response.output_text.delta", **where, "delta": WORDS[i % len(WORDS)]}
                   for i in range(deltas)]
        part = {"type": "output_text", "text": text, "annotations": []}
        events.append({"type": "response.output_text.done", **where, "text": text})
        events.append({"type": "response.content_part.done", **where, "part": part})
        done = {**item, "status": "completed", "content": [part]}
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done})
    final = {**response, "status": "completed", "output": [done]}
    events.append({"type": "response.completed", "response": final})
    return events
