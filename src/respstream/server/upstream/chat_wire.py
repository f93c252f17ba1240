"""The Chat Completions wire, both ways, without IO: the streaming request body, the one-line ``data:`` events most
reads are made of, ``Retry-After``, and the readable message of an error body."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import msgspec

from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.cache_hints import CACHE_BREAKPOINT_KEY, marked_content, strip_cache_marks
from respstream.server.upstream.provider_tools import REASONING_KEY

__all__ = ["build_request_body", "error_message", "parse_retry_after", "simple_data_events"]


def build_request_body(
    request: GenerationRequest, *, include_usage: bool = True, model: str | None = None, cache_fields: bool = True
) -> dict[str, Any]:
    """The JSON body for a streaming Chat Completions call (``model`` overrides ``request.model``). ``cache_fields``:
    send the client's ``prompt_cache_options`` / ``prompt_cache_retention`` as given and its breakpoints as
    ``prompt_cache_breakpoint`` on the marked message's last content part (OpenAI's Chat Completions takes all three;
    the embedded model, whose prefix cache is the gateway's own, gets none)."""
    messages = request.messages
    if any(REASONING_KEY in m for m in messages):  # (a provider's signed reasoning: nothing a Chat server takes)
        messages = [{k: v for k, v in m.items() if k != REASONING_KEY} for m in messages]
    if cache_fields and any(CACHE_BREAKPOINT_KEY in m for m in messages):
        messages = [{**strip_cache_marks([m])[0], "content": marked_content(m.get("content"), m[CACHE_BREAKPOINT_KEY],
                                                                              "text")}
                    if CACHE_BREAKPOINT_KEY in m else m for m in messages]
    messages = strip_cache_marks(messages)
    body: dict[str, Any] = {"model": model or request.model, "messages": messages, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.options:
        body.update(request.options)
    if cache_fields:
        body.update(request.cache.wire)
    return body


def simple_data_events(raw: bytes) -> list[bytes] | None:
    """The payloads of a read made only of whole one-line ``data: X`` events (LF framing), else ``None``.

    Servers write one such event per token, so nearly every read is this shape; anything else (comments, ``event:``
    lines, CR framing, multi-line data, a partial event) returns ``None`` and goes through the full SSE decoder. Only
    valid when no partial event is pending from an earlier read.
    """
    if not raw.startswith(b"data: ") or not raw.endswith(b"\n\n") or b"\r" in raw:
        return None
    payloads = raw[6:-2].split(b"\n\ndata: ")
    # Each event is its payload plus exactly two LFs: any other LF (a comment, an `event:` line, multi-line data, a
    # blank line too many) lands inside a payload, and then the full decoder reads it. (Joined and searched: one
    # copy and a memchr, faster than counting the LFs of the read.)
    if b"\n" in b"".join(payloads):
        return None
    return payloads


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date); ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_message(body: bytes) -> str:
    """The human part of an upstream error body (OpenAI ``{"error": {"message"}}``, ``{"detail"}``, or text)."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body[:300].decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return body[:300].decode("utf-8", "replace").strip()
