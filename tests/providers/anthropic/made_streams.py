"""Anthropic streams made here for the request tests (NOT recordings: the recorded ones are in tests/data/providers),
in the API's documented event shapes."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["sse", "text_stream", "thinking_tool_stream", "tool_stream"]


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _start(model: str) -> dict[str, Any]:
    return {"type": "message_start", "message": {"id": "msg_made", "type": "message", "role": "assistant",
                                                 "model": model, "content": [], "stop_reason": None,
                                                 "usage": {"input_tokens": 5, "output_tokens": 1}}}


def text_stream(text: str, *, model: str = "claude-sonnet-4-20250514", stop: str = "end_turn") -> bytes:
    return sse([_start(model),
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}},
                {"type": "message_stop"}])


def tool_stream(name: str, arguments: dict[str, Any], *, call_id: str = "toolu_made",
                model: str = "claude-sonnet-4-20250514") -> bytes:
    raw = json.dumps(arguments)
    return sse([_start(model),
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "input_json_delta", "partial_json": raw[:3]}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "input_json_delta", "partial_json": raw[3:]}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
                {"type": "message_stop"}])


def thinking_tool_stream(thought: str, signature: str, name: str, arguments: dict[str, Any], *,
                         call_id: str = "toolu_made", model: str = "claude-sonnet-4-20250514") -> bytes:
    return sse([_start(model),
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": thought}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "signature_delta", "signature": signature}},
                {"type": "content_block_stop", "index": 0},
                {"type": "content_block_start", "index": 1,
                 "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
                {"type": "content_block_delta", "index": 1,
                 "delta": {"type": "input_json_delta", "partial_json": json.dumps(arguments)}},
                {"type": "content_block_stop", "index": 1},
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
                {"type": "message_stop"}])
