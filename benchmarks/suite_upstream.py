"""A SIMULATED Chat Completions upstream that can answer the public Open Responses suite's requests, for the board's
compliance row (benchmarks/board_compliance.py): the gateways that bridge Responses to Chat Completions (respstream's
chat bridge, LiteLLM's) sit in front of this same server, so the score says what the gateway does with the stream.

It is not a model. Every answer is fixed text, except that a request offering function tools gets a call to the
first one, with arguments made from its schema's required properties (a string for each; what the suite's
``tool-calling`` test offers). ``"stream": true`` gets Chat Completions chunks (role, text deltas or the call, the
finish chunk, a usage chunk when ``stream_options.include_usage`` asks, ``data: [DONE]``); otherwise one
``chat.completion`` object. Images and other content parts are accepted and not read.

Run alone: ``python benchmarks/suite_upstream.py --port-file F`` (writes the port it listens on).
"""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["ANSWER", "app", "tool_call"]

ANSWER = "Hello from the SIMULATED upstream."
MODEL = "fake-model"


def tool_call(tools: list[Any]) -> dict[str, Any] | None:
    """A call to the first function tool offered (either Chat Completions' nested or the flat shape), or None."""
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        schema = function.get("parameters") or {}
        properties = schema.get("properties") or {}
        arguments = {name: "San Francisco, CA" if properties.get(name, {}).get("type", "string") == "string" else 1
                     for name in schema.get("required") or []}
        return {"id": "call_simulated_1", "type": "function",
                "function": {"name": str(function.get("name", "")), "arguments": json.dumps(arguments)}}
    return None


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-suite", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def _stream(call: dict[str, Any] | None, usage: dict[str, int], with_usage: bool) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    if call is not None:
        yield _chunk({"tool_calls": [{"index": 0, **call}]})
        yield _chunk({}, "tool_calls")
    else:
        for word in ANSWER.split(" "):
            yield _chunk({"content": word + " " if not word.endswith(".") else word})
        yield _chunk({}, "stop")
    if with_usage:
        yield b"data: " + json.dumps({"id": "chatcmpl-suite", "object": "chat.completion.chunk", "created": 1,
                                      "model": MODEL, "choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


async def chat_completions(request: Request) -> Response:
    try:
        body = await request.json()
    except ValueError as exc:
        return JSONResponse({"error": {"message": f"body is not JSON: {exc}", "type": "invalid_request_error"}},
                            status_code=400)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return JSONResponse({"error": {"message": "messages: a non-empty list is required",
                                       "type": "invalid_request_error", "param": "messages"}}, status_code=400)
    call = tool_call(body.get("tools") or []) if body.get("tool_choice") != "none" else None
    usage = {"prompt_tokens": 5 * len(body["messages"]), "completion_tokens": 6,
             "total_tokens": 5 * len(body["messages"]) + 6}
    if body.get("stream"):
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(_stream(call, usage, with_usage), media_type="text/event-stream")
    message: dict[str, Any] = {"role": "assistant", "content": None if call else ANSWER}
    if call is not None:
        message["tool_calls"] = [call]
    return JSONResponse({"id": "chatcmpl-suite", "object": "chat.completion", "created": 1, "model": MODEL,
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": "tool_calls" if call else "stop"}], "usage": usage})


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1,
                                                     "owned_by": "simulated"}]})


app = Starlette(routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"]),
                        Route("/chat/completions", chat_completions, methods=["POST"]),
                        Route("/v1/models", models, methods=["GET"])])


def main() -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port-file", required=True, help="where to write the port it listens on")
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    Path(args.port_file).write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
