"""SIMULATED upstreams for the board: one raw asyncio HTTP/1.1 server answering Chat Completions and Responses
requests with pre-encoded bytes (encoded once at start, written in one write per response), keep-alive.

It is not a model. Every system on the board (and the direct client) talks to the same process, so the upstream's
cost is the same for all of them and as small as it can be in Python (benchmarks/server_throughput.py's ninth-pass
lesson: an upstream that encodes per request sets the pace, not the gateway).

Routes (any prefix before them is ignored, so ``/v1/chat/completions`` and ``/chat/completions`` both work):

- ``POST .../chat/completions``: ``"stream": true`` -> a chunked SSE body of ``DELTAS`` content chunks, a finish
  chunk, a usage chunk and ``data: [DONE]``; otherwise one ``chat.completion`` JSON object.
- ``POST .../responses``: ``"stream": true`` -> an OpenAI-shaped Responses stream (created, in_progress, item and
  part added, ``DELTAS`` text deltas, text/part/item done, completed); otherwise the Response JSON object.
- ``GET .../models``: a one-model list (some gateways probe it).
- A path containing ``/cut/`` (e.g. an upstream base URL ``http://127.0.0.1:P/cut/v1``): the stream stops after
  half its deltas and the connection is closed without the chunked body's last chunk (an upstream that died
  mid-stream).
- A path containing ``/long/``: the same answers with ``LONG_DELTAS`` (200) deltas (the CPU-per-event figure, as
  benchmarks/server_throughput.py's 200-delta responses).
- A path containing ``/stall/``: the stream's head and first frame, then nothing until the client goes away (an idle
  stream: the memory-per-connection figures hold thousands of these).
- A path containing ``/drip/``: the ``/long/`` stream, one frame every ``DRIP_SECONDS`` (an active stream that lasts
  minutes: the memory per active connection holds a thousand of these while events flow); it stops writing when
  the client goes away.

Run alone: ``python benchmarks/fake_upstreams.py --port-file F [--deltas 10]`` (prints nothing; writes the port).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from text_events import text_response_events  # (the same folder)

__all__ = ["DRIP_SECONDS", "LONG_DELTAS", "MODEL", "UpstreamBodies", "serve_forever", "start_upstream"]

MODEL = "fake-model"
LONG_DELTAS = 200
DRIP_SECONDS = 0.5
_WORDS = ("The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away.")


def tokens(deltas: int) -> list[str]:
    return [("" if i == 0 else " ") + _WORDS[i % len(_WORDS)] for i in range(deltas)]


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body) if body else b""


def _head(content_type: bytes, *, chunked: bool, length: int = 0) -> bytes:
    framing = b"transfer-encoding: chunked" if chunked else b"content-length: %d" % length
    return (b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type + b"\r\n" + framing
            + b"\r\nconnection: keep-alive\r\n\r\n")


def _sse_response(frames: list[bytes]) -> tuple[bytes, bytes, bytes]:
    """(the whole chunked response, the same cut after half its frames: no last chunk, its head and first frame)."""
    head = _head(b"text/event-stream", chunked=True)
    body = b"".join(_chunked(f) for f in frames)
    cut = b"".join(_chunked(f) for f in frames[: len(frames) // 2])
    return head + body + b"0\r\n\r\n", head + cut, head + _chunked(frames[0])


def _pieces(frames: list[bytes]) -> list[bytes]:
    pieces = [_chunked(f) for f in frames]
    pieces[0] = _head(b"text/event-stream", chunked=True) + pieces[0]
    pieces[-1] += b"0\r\n\r\n"
    return pieces


def _json_response(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return _head(b"application/json", chunked=False, length=len(body)) + body


def chat_frames(deltas: int) -> list[bytes]:
    head = ('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"' + MODEL
            + '","choices":[{"index":0,')
    out = [(head + '"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n').encode()]
    out += [(head + '"delta":{"content":' + json.dumps(t) + '},"finish_reason":null}]}\n\n').encode()
            for t in tokens(deltas)]
    out.append((head + '"delta":{},"finish_reason":"stop"}]}\n\n').encode())
    out.append(b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"%s","choices":[],'
               b'"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}\n\n'
               % (MODEL.encode(), deltas, deltas + 5))
    out.append(b"data: [DONE]\n\n")
    return out


def chat_json(deltas: int) -> dict[str, Any]:
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(tokens(deltas))},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": deltas, "total_tokens": deltas + 5}}


def responses_frames(deltas: int) -> tuple[list[bytes], dict[str, Any]]:
    """The Responses stream's frames and its final Response object."""
    response: dict[str, Any] = {"id": "resp_bench", "object": "response", "created_at": 1, "status": "in_progress",
                                "model": MODEL, "output": []}
    events = text_response_events(response, "msg_bench", tokens(deltas),
                                  {"input_tokens": 5, "output_tokens": deltas, "total_tokens": deltas + 5})
    out: list[bytes] = []
    for number, event in enumerate(events):
        event = {"type": event["type"], "sequence_number": number, **event}
        out.append(f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode())
    return out, events[-1]["response"]


class UpstreamBodies:
    """Every answer, encoded once: (route, streaming, cut) -> the bytes of the whole HTTP response."""

    def __init__(self, deltas: int) -> None:
        chat_full, chat_cut, chat_stall = _sse_response(chat_frames(deltas))
        frames, final = responses_frames(deltas)
        native_full, native_cut, native_stall = _sse_response(frames)
        self.stalls = {"chat": chat_stall, "responses": native_stall}
        # one piece a frame, the head with the first, the last chunk with the last (for /drip/)
        self.drips = {route: _pieces(frames_of) for route, frames_of in (("chat", chat_frames(deltas)),
                                                                          ("responses", frames))}
        self.answers = {
            ("chat", True, False): chat_full, ("chat", True, True): chat_cut,
            ("chat", False, False): _json_response(chat_json(deltas)),
            ("responses", True, False): native_full, ("responses", True, True): native_cut,
            ("responses", False, False): _json_response(final),
        }
        self.answers[("chat", False, True)] = self.answers[("chat", False, False)]
        self.answers[("responses", False, True)] = self.answers[("responses", False, False)]
        self.models = _json_response({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1,
                                                                  "owned_by": "bench"}]})
        self.not_found = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n"


class _Connection(asyncio.Protocol):
    """One client connection: parse request heads (content-length or chunked bodies), answer each at once."""

    def __init__(self, bodies: UpstreamBodies, long: UpstreamBodies) -> None:
        self.short = bodies
        self.long = long
        self.bodies = bodies
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.dripping: asyncio.Future[None] | None = None  # (held: a task nobody references may be collected)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop's is no asyncio.Transport subclass)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            lines = head.split("\r\n")
            method, target = [*lines[0].split(" "), "", ""][:2]
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            rest = self.buffer[end + 4 :]
            if fields.get("transfer-encoding", "").lower() == "chunked":
                stop = rest.find(b"0\r\n\r\n")
                if stop < 0:
                    return
                body, self.buffer = _unchunk(rest[:stop]), rest[stop + 5 :]
            else:
                length = int(fields.get("content-length", "0") or 0)
                if len(rest) < length:
                    return
                body, self.buffer = rest[:length], rest[length:]
            self._answer(method, target, body)

    def _answer(self, method: str, target: str, body: bytes) -> None:
        assert self.transport is not None
        path = target.split("?", 1)[0]
        self.bodies = self.long if "/long/" in path or "/drip/" in path else self.short
        if method == "GET" and path.endswith("/models"):
            self.transport.write(self.bodies.models)
            return
        route = "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") else ""
        if method != "POST" or not route:
            self.transport.write(self.bodies.not_found)
            return
        try:
            stream = bool(json.loads(body or b"{}").get("stream"))
        except ValueError:
            stream = False
        if stream and "/stall/" in path:
            self.transport.write(self.bodies.stalls[route])  # and nothing more: the client ends it
            return
        if stream and "/drip/" in path:
            self.dripping = asyncio.ensure_future(self._drip(self.bodies.drips[route]))
            return
        cut = "/cut/" in path
        self.transport.write(self.bodies.answers[(route, stream, cut)])
        if cut and stream:
            self.transport.close()
            self.transport = None

    async def _drip(self, pieces: list[bytes]) -> None:
        for at, piece in enumerate(pieces):
            if at:
                await asyncio.sleep(DRIP_SECONDS)
            if self.transport is None or self.transport.is_closing():
                return  # the client went away
            self.transport.write(piece)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.dripping is not None:
            self.dripping.cancel()


def _unchunk(data: bytes) -> bytes:
    out, at = [], 0
    while at < len(data):
        line_end = data.find(b"\r\n", at)
        size = int(data[at:line_end].split(b";")[0], 16)
        out.append(data[line_end + 2 : line_end + 2 + size])
        at = line_end + 2 + size + 2
    return b"".join(out)


async def start_upstream(deltas: int, port: int = 0) -> asyncio.Server:
    """The SIMULATED upstream on 127.0.0.1 (``port`` 0: a free one) in the running loop."""
    bodies, long = UpstreamBodies(deltas), UpstreamBodies(LONG_DELTAS)
    return await asyncio.get_running_loop().create_server(lambda: _Connection(bodies, long), "127.0.0.1", port)


async def serve_forever(deltas: int, port_file: str) -> None:
    server = await start_upstream(deltas)
    Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port-file", required=True, help="where to write the port it listens on")
    parser.add_argument("--deltas", type=int, default=10, help="text deltas a response (default 10)")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(serve_forever(args.deltas, args.port_file))
    except ImportError:
        asyncio.run(serve_forever(args.deltas, args.port_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
