"""SIMULATION: a fake OpenAI-compatible Chat Completions server for tests. It is not a model.

A real HTTP server (uvicorn, raw ASGI) on 127.0.0.1 and a random port, in a background thread, so the code under
test talks real HTTP/1.1 over loopback. Each ``POST /v1/chat/completions`` consumes the next queued script (the last
script repeats when the queue is empty). A script is a list of steps:

- ``Status(code, body, headers)`` as the first step: a non-streaming error response (5xx, 429 + Retry-After, ...)
- ``Chunk(obj)``: one ``data: {json}`` event; ``Raw(bytes)``: bytes as they are; ``Done()``: ``data: [DONE]``
- ``Sleep(seconds)``: pause (ends early when the client goes away); ``Stall()``: send nothing until the client leaves
- ``Drop()``: abort the connection mid-body (the client sees a truncated chunked body)
- ``Headers(dict)`` as the first step: extra response headers for the stream (e.g. ``content-encoding: gzip`` with
  ``Raw`` pre-compressed bytes)

Helpers build the usual chunks: :func:`text`, :func:`reasoning`, :func:`refusal`, :func:`tool`, :func:`finish`,
:func:`usage`. The server records request bodies, headers and client addresses (``(host, port)``: the same port
means the same keep-alive connection), and how many streams ended because the client disconnected.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from .asgi_body import request_body

__all__ = [
    "Chunk",
    "Done",
    "Drop",
    "FakeChatCompletionsServer",
    "Headers",
    "Raw",
    "Sleep",
    "Stall",
    "Status",
    "Step",
    "finish",
    "free_port",
    "reasoning",
    "refusal",
    "text",
    "tool",
    "usage",
]


@dataclass(frozen=True)
class Status:
    code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    obj: dict[str, Any]


@dataclass(frozen=True)
class Raw:
    data: bytes


@dataclass(frozen=True)
class Done:
    pass


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Headers:
    headers: dict[str, str]


@dataclass(frozen=True)
class Stall:
    pass


@dataclass(frozen=True)
class Drop:
    pass


Step = Status | Headers | Chunk | Raw | Done | Sleep | Stall | Drop


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> Chunk:
    return Chunk(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
    )


def text(content: str) -> Chunk:
    return _chunk({"content": content})


def reasoning(content: str, key: str = "reasoning_content") -> Chunk:
    return _chunk({key: content})


def refusal(content: str) -> Chunk:
    return _chunk({"refusal": content})


def tool(index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None) -> Chunk:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    fragment: dict[str, Any] = {"function": function}
    if index is not None:
        fragment["index"] = index
    if id is not None:
        fragment["id"], fragment["type"] = id, "function"
    return _chunk({"tool_calls": [fragment]})


def finish(reason: str = "stop") -> Chunk:
    return _chunk({}, reason)


def usage(prompt: int, completion: int, *, reasoning_tokens: int = 0, cached: int = 0) -> Chunk:
    return Chunk(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
    )


def free_port() -> int:
    """A loopback port nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Abort(Exception):
    """Raised inside the ASGI app to make uvicorn cut the connection mid-body."""


class FakeChatCompletionsServer:
    """SIMULATED Chat Completions endpoint (see module docstring). Use as a context manager or start()/stop()."""

    def __init__(self, models: list[str] | None = None, *, model_fields: dict[str, Any] | None = None,
                 props: dict[str, Any] | None = None, list_models: bool = True, port: int = 0,
                 tokenizer: bool = False, route: str = "/v1/chat/completions") -> None:
        """``model_fields``: extra fields of every ``/v1/models`` object (e.g. vLLM's ``max_model_len``);
        ``props``: served as llama.cpp's ``GET /props`` (else 404); ``list_models=False``: no ``GET /v1/models``
        (404), as some servers have none; ``port``: a fixed port (0: any free one); ``tokenizer``: llama.cpp's
        ``POST /apply-template`` (the messages' contents joined) and ``POST /tokenize`` (SIMULATED: one token per
        character, a stand-in for a real vocabulary that packs a run of one character badly); ``route``: the POST
        path the scripts answer (``/v1/responses`` with ``Raw`` Responses events: a SIMULATED native Responses
        upstream written by the same server, for a like-for-like benchmark: benchmarks/native_end_to_end.py)."""
        self.route = route
        self.models = models or ["fake-model"]
        self.model_fields = dict(model_fields or {})
        self.props = props
        self.list_models = list_models
        self.fixed_port = port
        self.tokenizer = tokenizer
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.clients: list[tuple[str, int]] = []  # every request's client address, /models included
        self._scripts: deque[list[Step]] = deque()
        self._last: list[Step] = [text("hello"), finish(), Done()]
        self._lock = threading.Condition()
        self.streams_finished = 0
        self.client_disconnects = 0
        self.chunks_sent = 0  # Chunk and Raw steps written, over every stream (what a client read at most)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- control -----------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *steps: Step) -> None:
        """Queue one script for the next request."""
        with self._lock:
            self._scripts.append(list(steps))

    def reset(self, *, default_script: bool = False) -> None:
        """Forget queued scripts and what was recorded; ``default_script`` also makes an empty queue answer
        "hello" again (instead of repeating the last script)."""
        with self._lock:
            if default_script:
                self._last = [text("hello"), finish(), Done()]
            self._scripts.clear()
            self.requests.clear()
            self.request_headers.clear()
            self.clients.clear()
            self.streams_finished = 0
            self.client_disconnects = 0
            self.chunks_sent = 0

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        """Block until ``count`` requests have been recorded (or timeout)."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.requests) >= count, timeout)

    def wait_finished(self, count: int, timeout: float = 5.0) -> bool:
        """Block until ``count`` streams have ended on the server side (or timeout)."""
        with self._lock:
            return self._lock.wait_for(lambda: self.streams_finished >= count, timeout)

    def start(self) -> FakeChatCompletionsServer:
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=self.fixed_port,
            log_level="critical",
            lifespan="off",
            access_log=False,
            ws="none",
            interface="asgi3",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-chat-completions", daemon=True)
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                break
            threading.Event().wait(0.01)
        if not self._server.started:
            raise RuntimeError("fake chat completions server did not start")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeChatCompletionsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- ASGI --------------------------------------------------------------------------------------------------

    def _next_script(self) -> list[Step]:
        with self._lock:
            if self._scripts:
                self._last = self._scripts.popleft()
            return self._last

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = await request_body(receive)
        path, method = scope["path"], scope["method"]
        with self._lock:
            client = scope.get("client") or ("", 0)
            self.clients.append((str(client[0]), int(client[1])))
        if method == "POST" and path in ("/apply-template", "/tokenize") and self.tokenizer:
            sent = json.loads(body or b"{}")
            if path == "/apply-template":
                prompt = "\n".join(str(m.get("content", "")) for m in sent.get("messages", []))
                await self._send_json(send, 200, {"prompt": prompt})
            else:
                await self._send_json(send, 200, {"tokens": list(range(len(str(sent.get("content", "")))))})
            return
        if method == "GET" and path == "/props" and self.props is not None:
            await self._send_json(send, 200, self.props)
            return
        if method == "GET" and path == "/v1/models" and self.list_models:
            data = {"object": "list", "data": [{"id": m, "object": "model", **self.model_fields} for m in self.models]}
            await self._send_json(send, 200, data)
            return
        if method != "POST" or path != self.route:
            await self._send_json(send, 404, {"error": {"message": f"no route {method} {path}"}})
            return
        with self._lock:
            self.requests.append(json.loads(body))
            self.request_headers.append({k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]})
            self._lock.notify_all()  # wait_for_requests()
        steps = self._next_script()
        if steps and isinstance(steps[0], Status):
            first = steps[0]
            await self._send_json(send, first.code, first.body or {"error": {"message": "scripted"}}, first.headers)
            return
        await self._stream(steps, receive, send)

    async def _stream(self, steps: list[Step], receive: Any, send: Any) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        watcher = asyncio.create_task(watch())
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
        if steps and isinstance(steps[0], Headers):
            headers += [(k.lower().encode(), v.encode()) for k, v in steps[0].headers.items()]
            steps = steps[1:]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for step in steps:
                if gone.is_set():
                    break
                if isinstance(step, Chunk):
                    await self._body(send, b"data: " + json.dumps(step.obj).encode() + b"\n\n")
                    with self._lock:
                        self.chunks_sent += 1
                elif isinstance(step, Raw):
                    await self._body(send, step.data)
                    with self._lock:
                        self.chunks_sent += 1
                elif isinstance(step, Done):
                    await self._body(send, b"data: [DONE]\n\n")
                elif isinstance(step, Sleep):
                    try:
                        await asyncio.wait_for(gone.wait(), step.seconds)
                    except TimeoutError:
                        pass
                elif isinstance(step, Stall):
                    await gone.wait()
                elif isinstance(step, Drop):
                    raise _Abort("scripted drop")
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            gone.set()
        finally:
            watcher.cancel()
            with self._lock:
                self.streams_finished += 1
                self.client_disconnects += int(gone.is_set())
                self._lock.notify_all()

    @staticmethod
    async def _body(send: Any, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    @staticmethod
    async def _send_json(send: Any, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(data).encode()
        raw_headers = [(b"content-type", b"application/json")]
        raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": payload})
