"""SIMULATION: a fake Gemini API on 127.0.0.1 for tests. It is not a model: it replays recorded bodies.

A raw ASGI app served by uvicorn in a thread (tests/fakes/server_thread.py):

- ``GET /v1beta/models``: the configured model ids, in Gemini's shape (two pages, to exercise ``pageToken``).
- ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``: checks ``x-goog-api-key`` (401 in Google's error
  shape when wrong), validates the body against the official ``google-genai`` SDK's request types (every key of the
  body known, ``contents`` / ``systemInstruction`` as ``types.Content``, ``tools`` as ``types.Tool``, ``toolConfig``,
  ``generationConfig``; a body that fails is answered 400 and recorded in ``invalid``), records it, then answers
  with the next queued :class:`Reply`: a status and body, written in random pieces that split UTF-8 characters and
  CRLF pairs, a short pause between pieces so the client's reads see them apart.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from google.genai import types
from pydantic import ValidationError

from fakes.asgi_body import request_body

__all__ = ["Reply", "SimulatedGemini", "random_pieces", "sse_body", "validate_request"]

_BODY_TYPES: dict[str, Any] = {
    "systemInstruction": types.Content,
    "toolConfig": types.ToolConfig,
    "generationConfig": types.GenerationConfig,
}


def validate_request(body: Any) -> str | None:
    """``None`` when ``body`` is a request the SDK's types accept, else what is wrong."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    known = {"contents", "tools", "safetySettings", "cachedContent", *_BODY_TYPES}
    unknown = set(body) - known
    if unknown:
        return f"unknown body fields {sorted(unknown)}"
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "contents must be a non-empty list"
    try:
        for content in contents:
            parsed = types.Content.model_validate(content)
            if parsed.role not in ("user", "model"):
                return f"contents role {parsed.role!r}"
        for tool in body.get("tools") or ():
            types.Tool.model_validate(tool)
        for key, model in _BODY_TYPES.items():
            if key in body:
                model.model_validate(body[key])
    except ValidationError as exc:
        return str(exc)
    return None


def sse_body(*chunks: dict[str, Any]) -> bytes:
    """A made-up stream body (not a recording): one ``data:`` event per chunk, CRLF framing as Gemini's."""
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in chunks)


def random_pieces(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` cut at random places, and always inside every multi-byte UTF-8 character and CRLF pair it has
    (at most 64 such forced cuts, so long bodies stay fast)."""
    cuts = {i for i in range(1, len(data)) if (data[i] & 0xC0) == 0x80 or (data[i - 1:i + 1] == b"\r\n")}
    forced = sorted(rng.sample(sorted(cuts), min(64, len(cuts)))) if cuts else []
    at, points = 0, set(forced)
    while at < len(data):
        at += rng.randint(1, 700)
        points.add(at)
    bounds = [0, *sorted(p for p in points if 0 < p < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class SimulatedGemini:
    """The ASGI app. ``requests``: (model, body) of every valid POST; ``invalid``: what failed validation."""

    def __init__(self, *, api_key: str, models: list[str], seed: int = 0,
                 limits: dict[str, tuple[int, int]] | None = None) -> None:
        """``limits``: model -> (inputTokenLimit, outputTokenLimit) listed for it."""
        self.api_key = api_key
        self.models = models
        self.limits = limits or {}
        self.replies: deque[Reply] = deque()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.invalid: list[str] = []
        self.headers_seen: list[dict[str, str]] = []
        self.rng = random.Random(seed)

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                if kind == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif kind == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.headers_seen.append(headers)
        body = await request_body(receive)
        if headers.get("x-goog-api-key") != self.api_key:
            await _answer(send, 401, json.dumps({"error": {"code": 401, "message": "API key not valid.",
                                                           "status": "UNAUTHENTICATED"}}).encode())
            return
        path = scope["path"]
        if scope["method"] == "GET" and path == "/v1beta/models":
            query = scope.get("query_string", b"").decode()
            half = len(self.models) // 2
            page = self.models[half:] if "pageToken=" in query else self.models[:half]
            listing: dict[str, Any] = {"models": [{"name": f"models/{m}", "supportedGenerationMethods":
                                                   ["generateContent", "countTokens"]} for m in page]}
            for entry in listing["models"]:
                limits = self.limits.get(entry["name"].removeprefix("models/"))
                if limits is not None:
                    entry["inputTokenLimit"], entry["outputTokenLimit"] = limits
            listing["models"].append({"name": "models/embedding-001", "supportedGenerationMethods": ["embedContent"]})
            if "pageToken=" not in query:
                listing["nextPageToken"] = "page-2"
            await _answer(send, 200, json.dumps(listing).encode())
            return
        prefix, suffix = "/v1beta/models/", ":streamGenerateContent"
        if scope["method"] != "POST" or not path.startswith(prefix) or not path.endswith(suffix) \
                or scope.get("query_string") != b"alt=sse":
            await _answer(send, 404, b'{"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}')
            return
        parsed = json.loads(body)
        problem = validate_request(parsed)
        if problem is not None:
            self.invalid.append(problem)
            await _answer(send, 400, json.dumps({"error": {"code": 400, "message": problem,
                                                           "status": "INVALID_ARGUMENT"}}).encode())
            return
        self.requests.append((path[len(prefix):-len(suffix)], parsed))
        reply = self.replies.popleft() if self.replies else Reply(500, b'{"error": {"message": "no reply queued"}}')
        content_type = b"text/event-stream" if reply.status == 200 else b"application/json"
        await send({"type": "http.response.start", "status": reply.status, "headers": [
            (b"content-type", content_type), *((k.encode(), v.encode()) for k, v in reply.headers.items())]})
        for piece in random_pieces(reply.body, self.rng):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(0.0005)
        await send({"type": "http.response.body", "body": b""})


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
