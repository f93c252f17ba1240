"""What bounds a WebSocket connection besides its message size: memory shared across connections, idleness, age
and a revoked key (issue 30; docs/security.md).

- :class:`WebSocketBudgets`: one per gateway. ``store``: bytes of the connections' own ``store: false`` responses
  (:class:`~respstream.server.store.memory_budgeted.BudgetedMemoryStore`), ``websocket_store_max_bytes_per_key``
  per API key, ``memory_store_max_bytes`` for all. ``queued``: bytes of ``response.create`` messages waiting behind a
  running turn, ``websocket_max_queued_bytes`` per connection, ``websocket_max_queued_bytes_total`` for all (a
  compressed message of a few KB inflates to ``max_body_bytes``: the count alone let each socket hold 16 MiB).
- :func:`wait_limit`: how long a connection may wait for its next message: until it has been idle
  ``websocket_idle_timeout_seconds`` or is ``websocket_max_connection_seconds`` old, whichever comes first (an idle
  socket held its slot forever and outlived its age limit, which was checked only when a message came).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from respstream.server.config import Config
from respstream.server.http_errors import HTTPError
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.websocket.actions import SessionLimits

__all__ = ["WebSocketBudgets", "age_error", "message_bytes", "revoked_error", "session_limits", "wait_limit"]


@dataclass(slots=True)
class WebSocketBudgets:
    store: ByteBudget
    queued: ByteBudget

    @classmethod
    def from_config(cls, config: Config) -> WebSocketBudgets:
        return cls(store=ByteBudget(total=config.memory_store_max_bytes,
                                    per_holder=config.websocket_store_max_bytes_per_key),
                   queued=ByteBudget(total=config.websocket_max_queued_bytes_total,
                                     per_holder=config.websocket_max_queued_bytes))


def message_bytes(message: str | bytes) -> int:
    """Memory a queued message holds (a str of non-ASCII text takes 2-4 bytes a character)."""
    return sys.getsizeof(message)


def wait_limit(config: Config, age: float) -> tuple[float, HTTPError]:
    """Seconds a connection ``age`` seconds old may wait for its next message, and the error it
    gets when that runs out."""
    left = config.websocket_max_connection_seconds - age
    idle = config.websocket_idle_timeout_seconds
    if idle > 0 and idle < left:
        return idle, HTTPError(400, "websocket_idle_timeout",
                               f"This WebSocket connection sent no message for {idle:g} s "
                               "(websocket_idle_timeout_seconds) and is closed; open a new connection.")
    return max(0.0, left), age_error(config)


def age_error(config: Config) -> HTTPError:
    return HTTPError(400, "websocket_connection_limit_reached",
                     "This WebSocket connection reached its time limit "
                     f"({config.websocket_max_connection_seconds:g} s); open a new connection.")


def revoked_error() -> HTTPError:
    return HTTPError(401, "invalid_api_key", "The API key this WebSocket connection authenticated with was revoked "
                     "(or the keys file no longer lists it); the connection is closed.")


def session_limits(config: Config) -> SessionLimits:
    """The session's limits from the configuration (the rest are the spec's numbers)."""
    return SessionLimits(max_body_bytes=config.max_body_bytes,
                         max_in_flight=config.websocket_max_in_flight,
                         max_named_streams=config.websocket_max_stream_ids,
                         max_lane_queued_bytes=config.websocket_max_queued_bytes_per_stream)
