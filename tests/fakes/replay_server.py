"""TEST DOUBLE: a loopback HTTP server that replays recorded Responses transcripts, and misbehaves on request.

This is not the gateway. It serves fixed transcripts on 127.0.0.1 so client tests can cut, stall and drip a stream
exactly where they want:

* ``POST /v1/responses`` streams the default transcript from sequence 0 (or returns its final Response as JSON
  when ``stream`` is false);
* ``GET /v1/responses/{id}?stream=true&starting_after=N`` (or ``Last-Event-ID: N``) streams the events after N,
  and answers ``204`` when N is at or past the terminal, as the gateway does;
* ``GET /v1/responses/{id}``, ``POST /v1/responses/{id}/cancel``, ``DELETE /v1/responses/{id}`` answer JSON.

Each request takes the next :class:`Plan` from a FIFO queue (or the default plan): an HTTP error before streaming,
a cut after K events (clean EOF or a broken chunked body), a stall, a gate the test opens, keep-alive comments,
one-byte drip. Every request is recorded for assertions (``server.requests``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "Plan",
    "RecordedRequest",
    "ReplayServer",
    "Transcript",
    "error_transcript",
    "failed_transcript",
    "incomplete_transcript",
    "text_transcript",
    "tool_transcript",
]


@dataclass
class Transcript:
    """A recorded response: its events in sequence order and how to frame them."""

    response_id: str
    events: list[dict[str, Any]]
    dialect: Literal["platform", "openai", "data-only"] = "platform"
    with_ids: bool = True  # send `id: <sequence_number>` lines, as the gateway does

    def frame(self, event: dict[str, Any]) -> bytes:
        parts = []
        if self.dialect == "platform":
            parts.append("event: message\n")
        elif self.dialect == "openai":
            parts.append(f"event: {event.get('type', '')}\n")
        if self.with_ids and "sequence_number" in event:
            parts.append(f"id: {event['sequence_number']}\n")
        parts.append("data: " + json.dumps(event, separators=(",", ":")) + "\n\n")
        return "".join(parts).encode()

    def final_response(self) -> dict[str, Any]:
        for event in reversed(self.events):
            response = event.get("response")
            if isinstance(response, dict):
                return response
        return {"id": self.response_id, "object": "response", "status": "in_progress"}

    @property
    def last_sequence_number(self) -> int:
        return int(self.events[-1]["sequence_number"])


@dataclass
class Plan:
    """How to answer one request. Event counts are per connection (the K-th event this connection sends)."""

    status: int = 200
    body: bytes | None = None  # the body of a non-200 answer
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None  # end the connection after this many events
    cut_mode: Literal["eof", "reset"] = "eof"  # clean end of body, or a chunked body that breaks off
    stall_after: int | None = None  # stop sending after this many events and hold the connection
    stall_seconds: float = 20.0
    gate_after: int | None = None  # after this many events wait for `gate` (set by the test), then go on
    gate: threading.Event | None = None
    gates: dict[int, threading.Event] = field(default_factory=dict)  # more gates: events sent -> gate
    keepalive_after: int | None = None  # after this many events send comments...
    keepalive_count: int = 0
    keepalive_interval: float = 0.0
    drip: bool = False  # one byte per write
    drip_delay: float = 0.0
    partial_tail: bytes = b""  # bytes written just before a cut (half an event, for example)
    ignore_starting_after: bool = False  # a buggy server that replays from 0 on resume


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class ReplayServer:
    """Serve transcripts on ``127.0.0.1:<random port>``; use as a context manager."""

    def __init__(self, *transcripts: Transcript) -> None:
        if not transcripts:
            raise ValueError("at least one transcript")
        self.transcripts = {t.response_id: t for t in transcripts}
        self.default = transcripts[0]
        self.plans: deque[Plan] = deque()
        self.default_plan = Plan()
        self.requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"replay": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *plans: Plan) -> ReplayServer:
        with self._lock:
            self.plans.extend(plans)
        return self

    def next_plan(self) -> Plan:
        with self._lock:
            return self.plans.popleft() if self.plans else self.default_plan

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    replay: ReplayServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Small writes go out at once: without this, Nagle + delayed ACK add ~40 ms per event on loopback.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read assertions, not access logs
        pass

    # --- routing ---------------------------------------------------------------------------------------------------

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.replay.record(RecordedRequest(method, url.path, query, headers, body))
        plan = self.replay.next_plan()
        try:
            if plan.status != 200:
                payload = plan.body if plan.body is not None else b'{"error":{"message":"planned failure"}}'
                return self._send(plan.status, payload, plan.content_type, plan.headers)
            parts = [p for p in url.path.split("/") if p]
            if method == "POST" and parts == ["v1", "responses"]:
                request = json.loads(body or b"{}")
                transcript = self.replay.default
                if request.get("stream") is False:
                    return self._json(200, transcript.final_response())
                return self._stream(transcript, transcript.events, plan)
            if len(parts) >= 3 and parts[:2] == ["v1", "responses"]:
                transcript = self.replay.transcripts.get(parts[2])
                if transcript is None:
                    return self._json(
                        404,
                        {
                            "detail": "not found",
                            "error": {
                                "type": "not_found_error",
                                "code": "response_not_found",
                                "message": f"no response {parts[2]}",
                            },
                        },
                    )
                if method == "GET" and len(parts) == 3:
                    if query.get("stream") == "true":
                        return self._resume(transcript, query, headers, plan)
                    return self._json(200, transcript.final_response())
                if method == "POST" and parts[3:] == ["cancel"]:
                    return self._json(200, {**transcript.final_response(), "status": "cancelled"})
                if method == "DELETE" and len(parts) == 3:
                    return self._json(200, {"id": transcript.response_id, "object": "response", "deleted": True})
            self._json(404, {"error": {"message": f"no route {method} {url.path}", "code": "route_not_found"}})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away mid-answer: that is what several tests do on purpose

    def _resume(self, transcript: Transcript, query: dict[str, str], headers: dict[str, str], plan: Plan) -> None:
        raw = query.get("starting_after", headers.get("last-event-id"))
        after = int(raw) if raw not in (None, "") else -1
        if plan.ignore_starting_after:
            after = -1
        if after >= transcript.last_sequence_number:
            return self._send(204, b"", None, {})
        events = [e for e in transcript.events if int(e["sequence_number"]) > after]
        self._stream(transcript, events, plan)

    # --- writing ---------------------------------------------------------------------------------------------------

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", {})

    def _send(self, status: int, body: bytes, content_type: str | None, headers: dict[str, str]) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 204:
            self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        if status != 204:
            self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def _chunk(self, data: bytes, plan: Plan) -> None:
        if plan.drip:
            for i in range(len(data)):
                self.wfile.write(b"1\r\n" + data[i : i + 1] + b"\r\n")
                self.wfile.flush()
                if plan.drip_delay:
                    time.sleep(plan.drip_delay)
            return
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _stream(self, transcript: Transcript, events: list[dict[str, Any]], plan: Plan) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-store")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        for name, value in plan.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        stopping = self.replay.stopping
        for sent, event in enumerate(events):
            if plan.cut_after is not None and sent >= plan.cut_after:
                return self._cut(plan)
            self._pause(sent, plan)
            self._chunk(transcript.frame(event), plan)
            if stopping.is_set():
                return
        self._pause(len(events), plan)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _pause(self, sent: int, plan: Plan) -> None:
        if plan.keepalive_after == sent:
            for _ in range(plan.keepalive_count):
                self._chunk(b": keep-alive\n\n", plan)
                self.replay.stopping.wait(plan.keepalive_interval)
        if plan.gate_after == sent and plan.gate is not None:
            plan.gate.wait(30)
        if sent in plan.gates:
            plan.gates[sent].wait(30)
        if plan.stall_after == sent:
            self.replay.stopping.wait(plan.stall_seconds)

    def _cut(self, plan: Plan) -> None:
        if plan.partial_tail:
            self._chunk(plan.partial_tail, plan)
        if plan.cut_mode == "eof":
            self.wfile.write(b"0\r\n\r\n")  # a clean end of body: EOF without a terminal event
        self.wfile.flush()
        # "reset": return without the last chunk; the handler closes the socket, the client sees a broken body


# --- transcript builders -------------------------------------------------------------------------------------------


def _response(response_id: str, status: str, *, background: bool, model: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1716387200000,
        "model": model,
        "status": status,
        "background": background,
        "output": [],
        **extra,
    }


def _numbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": e["type"], "sequence_number": n, **{k: v for k, v in e.items() if k != "type"}}
        for n, e in enumerate(events)
    ]


def _message_events(msg_id: str, index: int, chunks: list[str], final: str | None = None) -> list[dict[str, Any]]:
    text = "".join(chunks) if final is None else final
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {"id": msg_id, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
    loc = {"item_id": msg_id, "output_index": index, "content_index": 0}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **loc, "part": {**part, "text": ""}},
    ]
    events += [{"type": "response.output_text.delta", **loc, "delta": c} for c in chunks]
    if final is not None:
        events.append({"type": "response.rewrite.in_progress"})
    events += [
        {"type": "response.output_text.done", **loc, "text": text},
        {"type": "response.content_part.done", **loc, "part": part},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
    return events


def text_transcript(
    response_id: str = "resp_text",
    chunks: list[str] | None = None,
    *,
    background: bool = False,
    dialect: Literal["platform", "openai", "data-only"] = "platform",
    rewrite_to: str | None = None,
    model: str = "gpt-oss-120b",
) -> Transcript:
    """created, in_progress, routing, one message streamed in ``chunks``, completed (with usage)."""
    chunks = ["Hello", ", ", "world", "."] if chunks is None else chunks
    final = "".join(chunks) if rewrite_to is None else rewrite_to
    msg_id = f"msg_{response_id}"
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": _response(
                response_id, "queued" if background else "in_progress", background=background, model=model
            ),
        },
        {
            "type": "response.in_progress",
            "response": _response(response_id, "in_progress", background=background, model=model),
        },
        {
            "type": "response.routing.completed",
            "model_id": model,
            "category": "fast",
            "source": "router",
            "reasoning": "short question",
        },
        *_message_events(msg_id, 0, chunks, rewrite_to),
    ]
    done_item = events[-1]["item"]
    usage = {"input_tokens": 7, "output_tokens": len(chunks), "total_tokens": 7 + len(chunks)}
    events.append(
        {
            "type": "response.completed",
            "response": _response(
                response_id,
                "completed",
                background=background,
                model=model,
                output=[done_item],
                output_text=final,
                usage=usage,
            ),
        }
    )
    return Transcript(response_id, _numbered(events), dialect)


def tool_transcript(response_id: str = "resp_tool", *, background: bool = False) -> Transcript:
    """A server tool call (function_call item with output), then a message using its result."""
    call = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "calculator",
        "arguments": "",
        "status": "in_progress",
    }
    args = '{"expression":"6*7"}'
    done = {**call, "arguments": args, "status": "completed", "output": "42"}
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": _response(response_id, "in_progress", background=background, model="m"),
        },
        {"type": "response.output_item.added", "output_index": 0, "item": call},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args[:8]},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args[8:]},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": args},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        *_message_events("msg_t", 1, ["It is ", "42."]),
    ]
    events.append(
        {
            "type": "response.completed",
            "response": _response(
                response_id,
                "completed",
                background=background,
                model="m",
                output=[done, events[-1]["item"]],
                output_text="It is 42.",
                usage={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            ),
        }
    )
    return Transcript(response_id, _numbered(events))


def _prefix(response_id: str, background: bool) -> list[dict[str, Any]]:
    return [
        {
            "type": "response.created",
            "response": _response(response_id, "in_progress", background=background, model="m"),
        },
        *_message_events(f"msg_{response_id}", 0, ["Par", "tial"])[:3],
    ]


def failed_transcript(response_id: str = "resp_failed", *, background: bool = False) -> Transcript:
    """OpenAI style: an error event, then response.failed."""
    err = {"code": "server_error", "message": "The model failed to generate a response."}
    events = [
        *_prefix(response_id, background),
        {"type": "error", "error": {"type": "server_error", **err, "param": None}},
        {
            "type": "response.failed",
            "response": _response(response_id, "failed", background=background, model="m", error=err),
        },
    ]
    return Transcript(response_id, _numbered(events), "openai")


def error_transcript(response_id: str = "resp_error", *, code: str = "internal_error") -> Transcript:
    """Seed platform style: a flat terminal error event."""
    events = [*_prefix(response_id, False), {"type": "error", "code": code, "message": "Unexpected upstream failure"}]
    return Transcript(response_id, _numbered(events))


def incomplete_transcript(response_id: str = "resp_incomplete") -> Transcript:
    """Platform dialect token-limit stop: response.completed whose status is incomplete."""
    events = [
        *_prefix(response_id, False),
        {
            "type": "response.completed",
            "response": _response(
                response_id,
                "incomplete",
                background=False,
                model="m",
                incomplete_details={"reason": "max_output_tokens"},
            ),
        },
    ]
    return Transcript(response_id, _numbered(events))
