"""Client frames of the WebSocket mode, checked before anything runs: the JSON object itself, ``stream_id``,
``generate`` and the steering input. Pure functions raising :class:`HTTPError` (the spec's error event names the
field); no IO."""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.server.http_errors import HTTPError

__all__ = ["STREAM_ID_MAX", "check_stream_id", "decode_frame", "pop_generate", "pop_stream_fields",
           "steering_items"]

STREAM_ID_MAX = 256
_STREAM_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def decode_frame(raw: str | bytes, limit: int) -> dict[str, Any]:
    """One client message as a JSON object (413 past ``limit`` bytes, 400 ``invalid_json`` otherwise)."""
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > limit:
        raise HTTPError(413, "request_too_large", f"The message is larger than {limit} bytes (max_body_bytes).")
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise HTTPError(400, "invalid_json", f"The message is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise HTTPError(400, "invalid_json", f"The message is not valid UTF-8 (at byte {exc.start}).") from None
    except RecursionError:
        raise HTTPError(400, "invalid_json", "The message nests arrays/objects too deeply.") from None
    if not isinstance(body, dict):
        raise HTTPError(400, "invalid_json", "A WebSocket message must be a JSON object.")
    return body


def check_stream_id(value: Any) -> str | None:
    """``stream_id`` of a ``response.create``: absent/null is the default lane; else 1-256 of ``[A-Za-z0-9_.-]``."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > STREAM_ID_MAX \
            or not _STREAM_ID_CHARS.issuperset(value):
        shown = repr(value)[:80] if isinstance(value, str) else type(value).__name__
        raise HTTPError(400, "invalid_stream_id",
                        f"Invalid stream_id {shown}: it must be a string of 1 to {STREAM_ID_MAX} characters of "
                        "A-Z, a-z, 0-9, '_', '.' and '-' (omit it for the default stream).", param="stream_id")
    return value


def pop_generate(body: dict[str, Any]) -> bool:
    """``generate`` (Codex's prewarm sends ``false``): a boolean, true when absent."""
    generate = body.pop("generate", True)
    if not isinstance(generate, bool):
        raise HTTPError(400, "invalid_type", f"generate must be a boolean, not {type(generate).__name__}.",
                        param="generate")
    return generate


def pop_stream_fields(body: dict[str, Any]) -> None:
    """Every response on the socket streams: ``"stream": true`` (the Agents SDKs, Python 0.24 / JS 0.20, send it)
    and ``stream_options`` (checked with the other fields) are taken and ignored; ``"stream": false`` asks for
    something the socket cannot do, so it is refused naming the field."""
    stream = body.pop("stream", None)
    if stream is None or stream is True:
        return
    if stream is False:
        raise HTTPError(400, "unsupported_parameter", "stream: false is not possible on a WebSocket (every response "
                        "on the socket streams); send true or leave it out.", param="stream")
    raise HTTPError(400, "invalid_type", "stream must be a boolean", param="stream")


def steering_items(value: Any) -> list[dict[str, Any]]:
    """The steering ``input`` as input items: a non-empty string, or a non-empty array of user messages. Raises
    ``ValueError`` saying what is wrong (the steer then fails with ``invalid_input``)."""
    if isinstance(value, str):
        if not value:
            raise ValueError("input must not be empty")
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise ValueError("input must be a non-empty string or a non-empty array of user messages")
    for i, item in enumerate(value):
        if not isinstance(item, dict) or item.get("type", "message") != "message" or item.get("role") != "user" \
                or not isinstance(item.get("content"), (str, list)):
            raise ValueError(f"input[{i}] must be a user message ({{\"role\": \"user\", \"content\": ...}})")
    return [dict(item) for item in value]
