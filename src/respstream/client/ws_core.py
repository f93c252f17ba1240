"""What the WebSocket twins (:mod:`ws_sync`, :mod:`ws_async`) share: URLs, headers, messages, one turn's reading.

How this works: WebSocket mode sends ``{"type": "response.create", ...}`` and receives one JSON event per message.
Each message is fed to a :class:`~respstream.protocol.stream.StreamCore` framed as one SSE event, so a turn over a
socket is sequenced, rule-checked and assembled exactly as a stream over HTTP is. A turn ends with its
``response.completed`` / ``response.incomplete`` / ``response.failed``; a flat ``error`` (the seed platform's terminal)
also ends it, while a nested ``error`` (openai/openresponses) is followed by ``response.failed`` and waits for it. The
spec's error envelope (``{"type": "error", "status": N, "error": {...}}``: no response was made) raises the same
typed exception an HTTP answer with that status would (:func:`~respstream.client.errors.status_error`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.client.core import ClientConfig, outcome_error
from respstream.client.errors import status_error
from respstream.errors import BadInputError, RespstreamError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event
from respstream.protocol.stream import StreamCore

__all__ = ["TurnReader", "create_message", "handshake_headers", "websocket_url"]

_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_HTTP_ONLY = ("stream", "stream_options")


def websocket_url(config: ClientConfig) -> str:
    """``ws(s)://<base>/responses`` for ``http(s)://<base>``."""
    base = config.base_url
    if base.startswith("https://"):
        base = "wss://" + base[len("https://"):]
    elif base.startswith("http://"):
        base = "ws://" + base[len("http://"):]
    elif not base.startswith(("ws://", "wss://")):
        raise RespstreamError(f"cannot open a WebSocket to {base!r} (need http://, https://, ws:// or wss://)")
    return base.rstrip("/") + "/responses"


def handshake_headers(config: ClientConfig) -> dict[str, str]:
    headers = dict(config.headers)
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


def create_message(request: dict[str, Any]) -> str:
    """The ``response.create`` message for a create body (HTTP-only fields dropped: every turn streams)."""
    body = {k: v for k, v in request.items() if k not in _HTTP_ONLY}
    return msgspec.json.encode({"type": "response.create", **body}).decode()


class TurnReader:
    """One turn: feed each received message; ``done`` after its terminal; ``result()`` assembles it."""

    def __init__(self, config: ClientConfig) -> None:
        self.core = StreamCore(window=config.window, max_event_size=config.max_event_size)
        self.done = False

    def feed(self, message: str | bytes) -> list[Event]:
        """The events this message releases. Raises the typed HTTP error for the spec's error envelope."""
        raw = message.encode() if isinstance(message, str) else message
        try:
            head = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise BadInputError(f"a WebSocket message is not JSON: {exc}") from None
        if not isinstance(head, dict):
            raise BadInputError("a WebSocket message is not a JSON object")
        if head.get("type") == "error" and "status" in head and "sequence_number" not in head:
            self.done = True
            status = head["status"] if isinstance(head["status"], int) else 500
            raise status_error(status, {}, raw)
        self.core.feed(b"data: " + raw + b"\n\n")
        kind = head.get("type")
        if kind in _ENDS or (kind == "error" and not isinstance(head.get("error"), dict)):
            self.done = True
            self.core.close()
        return self.core.events()

    def result(self) -> AssembledResponse:
        """The assembled response; raises ResponseFailed / ResponseIncomplete / StreamError like ``stream.result()``."""
        result = self.core.result
        error = outcome_error(result)
        if error is not None:
            raise error
        return result
