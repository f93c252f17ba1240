"""What the sans-IO WebSocket session (session.py) asks of its transport, and what the transport reports back:
the actions (:class:`Send`, :class:`Start`, :class:`Stop`, :class:`Evict`), how a response ended
(:class:`Outcome`) and the session's limits (:class:`SessionLimits`). Plain data: no IO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TERMINAL_STATES", "Action", "Evict", "Outcome", "Send", "SessionLimits", "Start", "Stop"]

# The statuses a response ends with (its log's terminal was sent).
TERMINAL_STATES = frozenset({"completed", "incomplete", "failed", "cancelled"})

_CLIENT_CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}


@dataclass(frozen=True, slots=True)
class Send:
    """Write this text message."""

    text: str


@dataclass(frozen=True, slots=True)
class Start:
    """Start a response for ``body`` (a create body: no ``type``, ``stream_id`` or ``generate``) on ``lane``, send
    ``metadata`` (when not None) before its log, then its log; report :meth:`Session.started` and the rest."""

    ticket: int
    lane: str | None
    body: dict[str, Any]
    generate: bool
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """End the running ``response_id`` now at a clean boundary: ``response.incomplete``, reason ``steered``."""

    response_id: str


@dataclass(frozen=True, slots=True)
class Evict:
    """Drop ``response_id`` from the connection's own store (a continuation of it failed on its lane)."""

    response_id: str


Action = Send | Start | Stop | Evict


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a response ended: its status, ``incomplete_details.reason`` and its output (for client tool calls)."""

    status: str
    reason: str | None = None
    output: tuple[dict[str, Any], ...] = ()

    def required_input(self) -> list[dict[str, Any]]:
        """The tool outputs the client owes when the response ended on its own tool calls."""
        if self.status != "completed":
            return []
        return [{"type": _CLIENT_CALLS[item["type"]], "call_id": item.get("call_id"), "name": item.get("name")}
                for item in self.output if item.get("type") in _CLIENT_CALLS]


@dataclass(slots=True)
class SessionLimits:
    max_body_bytes: int = 1 << 20
    max_in_flight: int = 16  # responses running together on one connection (the spec's 16)
    max_named_streams: int = 32  # distinct stream_ids over the connection's life (the spec's 32)
    max_lane_queued_bytes: int = 1 << 20  # bytes of creates waiting on one lane
    max_pending_steers: int = 8  # accepted steers waiting for one response's successor
    remembered_responses: int = 256  # finished responses kept for steer/inject answers (ids and status only)
    remembered_turns: int = 64  # turn_id -> turn state
    remembered_prewarms: int = 8  # prewarms whose instructions and tools a continuation inherits
