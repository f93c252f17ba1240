"""The fields of a stream's ``error`` event, shared by the writer (server/events/) and the store's lease, which ends
a dead writer's log (store/lease.py) and so must shape the same terminal without importing the writer's layer."""

from __future__ import annotations

from typing import Any

__all__ = ["ERROR_CODES", "flat_error"]

# Stream error codes (documented in docs/configuration.md) -> the OpenAI-style `error.type`.
ERROR_CODES: dict[str, str] = {
    "internal_error": "server_error",
    "upstream_timeout": "server_error",
    "upstream_error": "server_error",
    "upstream_unavailable": "server_error",
    "tool_error": "server_error",
    "rate_limited": "rate_limit_error",
    "cancelled": "cancelled",
    "server_shutdown": "server_error",
    "worker_lost": "server_error",
    "store_unavailable": "server_error",
    "event_too_large": "server_error",
    "slow_reader": "server_error",  # one reader cut for not reading (server/http/stream_timer.py); not in the log
}


def flat_error(code: str, message: str) -> dict[str, Any]:
    """The fields of the platform dialect's terminal ``error`` event: the seed's flat ``code/message/param``, and the
    same again as a nested ``error`` object. The official SDKs raise on a stream event whose data carries ``error``
    (openai-python's ``Stream``), so a failed response is an exception there, not an event yielded silently; a
    seed-style client reads the flat fields as before."""
    nested = {"type": ERROR_CODES.get(code, "server_error"), "code": code, "message": message, "param": None}
    return {"code": code, "message": message, "param": None, "error": nested}
