"""The server's own WebSocket events (not in any response's log), built as JSON text: the spec's error event
(``ResponseWsError``), ``response.metadata`` (turn state), and the answers to ``response.steer`` and
``response.inject``. Each carries ``stream_id`` when it belongs to a named lane. Pure functions: no IO."""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.server.http_errors import HTTPError, envelope

__all__ = ["error_event", "inject_created", "inject_failed", "metadata_event", "steer_accepted", "steer_failed",
           "steer_pending"]

_encode = msgspec.json.Encoder().encode


def _text(event: dict[str, Any]) -> str:
    return _encode(event).decode()


def _lane(event: dict[str, Any], stream_id: str | None) -> dict[str, Any]:
    if stream_id is not None:
        event["stream_id"] = stream_id
    return event


def error_event(exc: HTTPError, stream_id: str | None = None) -> str:
    """``{"type": "error", "status", "stream_id"?, "error": {"type", "code", "message", "param"}}``."""
    body = envelope(exc.status, exc.code, exc.message, exc.param, **exc.extra)
    return _text(_lane({"type": "error", "status": exc.status}, stream_id) | {"error": body["error"]})


def metadata_event(turn_state: str, client_metadata: dict[str, Any], stream_id: str | None) -> str:
    """``response.metadata``: Codex reads its sticky turn state from ``headers["x-codex-turn-state"]``; ``metadata``
    echoes the request's ``client_metadata``."""
    return _text(_lane({"type": "response.metadata", "headers": {"x-codex-turn-state": turn_state},
                        "metadata": client_metadata}, stream_id))


def steer_accepted(steer_id: str, response_id: str, sequence_number: int, stream_id: str | None) -> str:
    return _text(_lane({"type": "response.steer.accepted", "sequence_number": sequence_number,
                        "steer": {"id": steer_id, "previous_response_id": response_id}}, stream_id))


def steer_pending(steer_id: str, response_id: str, required_input: list[dict[str, Any]], sequence_number: int,
                  stream_id: str | None) -> str:
    return _text(_lane({"type": "response.steer.pending", "sequence_number": sequence_number,
                        "steer": {"id": steer_id, "previous_response_id": response_id},
                        "reason": "waiting_for_required_input", "required_input": required_input}, stream_id))


def steer_failed(steer_id: str | None, response_id: Any, steer_input: Any, code: str, message: str,
                 sequence_number: int, stream_id: str | None) -> str:
    """The input comes back uncommitted; ``steer.id`` only when one was allocated (a failure after acceptance)."""
    steer: dict[str, Any] = {"id": steer_id} if steer_id is not None else {}
    steer |= {"previous_response_id": response_id, "input": steer_input}
    return _text(_lane({"type": "response.steer.failed", "sequence_number": sequence_number, "steer": steer,
                        "error": {"code": code, "message": message}}, stream_id))


def inject_created(response_id: str, sequence_number: int, stream_id: str | None) -> str:
    return _text(_lane({"type": "response.inject.created", "response_id": response_id,
                        "sequence_number": sequence_number}, stream_id))


def inject_failed(response_id: Any, inject_input: Any, code: str, message: str, sequence_number: int,
                  stream_id: str | None) -> str:
    return _text(_lane({"type": "response.inject.failed", "response_id": response_id, "input": inject_input,
                        "error": {"code": code, "message": message}, "sequence_number": sequence_number},
                       stream_id))
