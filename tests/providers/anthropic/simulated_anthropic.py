"""A SIMULATED Anthropic Messages API on loopback (not Anthropic): ``POST /v1/messages`` answers each request with the
next queued :class:`Reply` (a recorded body), written in random chunk sizes so UTF-8 characters and CRLF pairs are
split across reads; ``GET /v1/models`` lists its models. Every request is kept (headers and JSON body) and its body
checked against the official ``anthropic`` SDK's request types (sdk_shapes.py) and the API's cache rules the types
cannot say (:func:`cache_problems`): a body they refuse is answered with Anthropic's own 400 ``invalid_request_error``
naming what is wrong, and listed in ``problems``."""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fakes.server_thread import ServerThread

from .sdk_shapes import request_problems

__all__ = ["Reply", "Seen", "SimulatedAnthropic", "cache_problems"]


def cache_problems(body: dict[str, Any]) -> list[str]:
    """The Messages API's ``cache_control`` rules beyond its types: at most 4 blocks marked, and in prompt order
    (tools, system, messages) no ``1h`` lifetime after a default (5 minute) one."""
    system = body.get("system")
    blocks = [*(body.get("tools") or ()), *(system if isinstance(system, list) else ())]
    for turn in body.get("messages") or ():
        content = turn.get("content") if isinstance(turn, dict) else None
        blocks += content if isinstance(content, list) else []
    ttls = [b["cache_control"].get("ttl", "5m") for b in blocks
            if isinstance(b, dict) and isinstance(b.get("cache_control"), dict)]
    problems = [f"A maximum of 4 blocks with cache_control may be provided. Found {len(ttls)}."] if len(ttls) > 4 \
        else []
    first_default = ttls.index("5m") if "5m" in ttls else len(ttls)
    if "1h" in ttls[first_default:]:
        problems.append("a ttl='1h' cache_control block must not come after a ttl='5m' one")
    return problems


@dataclass
class Reply:
    body: bytes
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    max_chunk: int = 17  # chunk sizes are 1..max_chunk bytes, from the server's seeded random


@dataclass
class Seen:
    headers: dict[str, str]
    body: dict[str, Any]
    problems: list[str]


class SimulatedAnthropic:
    """SIMULATED provider. ``replies``: what the next requests get (FIFO; an empty queue is a 500 saying so)."""

    def __init__(self, models: list[str], *, seed: int = 0) -> None:
        self.models = models
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.model_queries: list[str] = []  # the query string of each GET /v1/models
        self.random = random.Random(seed)
        self.seed = seed
        app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"]),
                                Route("/v1/models", self._models, methods=["GET"])])
        self._server = ServerThread(app)

    def __enter__(self) -> SimulatedAnthropic:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def problems(self) -> list[str]:
        return [p for seen in self.requests for p in seen.problems]

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()

    def chunks(self, body: bytes, max_chunk: int) -> list[bytes]:
        out, at = [], 0
        while at < len(body):
            size = self.random.randint(1, max_chunk)
            out.append(body[at : at + size])
            at += size
        return out

    async def _models(self, request: Request) -> Response:
        self.model_queries.append(str(request.url.query))
        data = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in self.models]
        return JSONResponse({"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None})

    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        problems = request_problems(body) + cache_problems(body) if isinstance(body, dict) \
            else ["body: not a JSON object"]
        self.requests.append(Seen(dict(request.headers), body if isinstance(body, dict) else {}, problems))
        if problems:
            return JSONResponse({"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": "; ".join(problems)}}, status_code=400)
        if not self.replies:
            return JSONResponse({"type": "error", "error": {"type": "api_error", "message": "no reply queued"}},
                                status_code=500)
        reply = self.replies.popleft()
        if reply.status != 200 or not reply.content_type.startswith("text/event-stream"):
            return Response(reply.body, status_code=reply.status, media_type=reply.content_type,
                            headers=reply.headers)
        pieces = self.chunks(reply.body, reply.max_chunk)

        async def write() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        return StreamingResponse(write(), status_code=200, media_type=reply.content_type, headers=reply.headers)
