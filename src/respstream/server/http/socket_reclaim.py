"""Idle WebSockets the connection guard may close to make room: the meeting point of the guard and the session.

Why (issue 42, M8): an upgraded connection kept its slot until it closed and was never replaceable, so 60 idle
authenticated WebSockets from one address with ``max_connections`` 60 kept ``/healthz`` from another address
failing, for as long as the sockets lived (300 s) and again when they re-opened.

How: the connection guard (http_guard.py), which counts the slots, knows a socket by its transport; the WebSocket
session (websocket/transport.py), which knows when its socket is idle, knows it by its ASGI scope. Both know the peer's
``(host, port)``. After an upgrade the guard :func:`track`\\ s the connection under it; while the session waits for
its next message with nothing queued or running it is :func:`idle` (and gives the guard a way to close it, and
its API key: from then on the socket counts for the key, not its address), otherwise :func:`busy`. An idle socket
is one of the connections making no progress in :class:`~respstream.server.http.peer_limit.PeerConnections`; when
the pool is full and it is chosen to make room, :func:`reclaim` asks its session to close it: the spec's error
event ``connection_reclaimed`` and close code 1013 (try again later), so the client knows why and may reconnect.
One process, one event loop: plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from respstream.server.http.peer_limit import PeerConnections
from respstream.server.http_errors import HTTPError

__all__ = ["RECLAIM_CODE", "busy", "forget", "idle", "reclaim", "reclaimed_error", "track"]

RECLAIM_CODE = 1013  # RFC 6455 "Try Again Later": the server is overloaded


class _Tracked:
    __slots__ = ("close", "conn", "key", "peers")

    def __init__(self, conn: Hashable, key: str, peers: PeerConnections) -> None:
        self.conn, self.key, self.peers = conn, key, peers
        self.close: Callable[[], None] | None = None  # the session's, while it is idle


_by_peer: dict[tuple[str, int], _Tracked] = {}
_by_conn: dict[Hashable, _Tracked] = {}


def _peer(address: Any) -> tuple[str, int] | None:
    if isinstance(address, (tuple, list)) and len(address) >= 2:
        return str(address[0]), int(address[1])
    return None


def track(peername: Any, conn: Hashable, key: str, peers: PeerConnections) -> None:
    """The guard: ``conn`` (client ``key`` of ``peers``) was upgraded to a WebSocket."""
    peer = _peer(peername)
    if peer is not None and key:
        tracked = _by_peer[peer] = _Tracked(conn, key, peers)
        _by_conn[conn] = tracked


def forget(peername: Any) -> str | None:
    """The guard: the upgraded connection ended. Returns the client it counted for last (None: not tracked)."""
    peer = _peer(peername)
    tracked = _by_peer.pop(peer, None) if peer is not None else None
    if tracked is None:
        return None
    _by_conn.pop(tracked.conn, None)
    return tracked.key


def idle(scope: Mapping[str, Any], close: Callable[[], None], owner: str | None = None) -> None:
    """The session: the socket waits for its next message with nothing to do; ``close()`` makes it close itself.
    ``owner``: the API key's owner id it authenticated with (from then on it counts for that key)."""
    peer = _peer(scope.get("client"))
    tracked = _by_peer.get(peer) if peer is not None else None
    if tracked is not None:
        tracked.close = close
        if owner is not None and tracked.key != (by_key := f"key:{owner}"):
            tracked.peers.rekey(tracked.conn, tracked.key, by_key)
            tracked.key = by_key
        tracked.peers.waiting(tracked.key, tracked.conn)


def busy(scope: Mapping[str, Any]) -> None:
    """The session: a message came (or the socket is closing): it is not idle."""
    peer = _peer(scope.get("client"))
    tracked = _by_peer.get(peer) if peer is not None else None
    if tracked is not None:
        tracked.close = None
        tracked.peers.working(tracked.conn)


def reclaim(conn: Hashable) -> bool:
    """The guard chose ``conn`` to make room: ask its session to close it. False when it is not an idle socket."""
    tracked = _by_conn.get(conn)
    if tracked is None or tracked.close is None:
        return False
    close, tracked.close = tracked.close, None
    close()
    return True


def reclaimed_error() -> HTTPError:
    return HTTPError(503, "connection_reclaimed", "The server needed this idle WebSocket connection's slot for "
                     "another client (max_connections); the connection is closed. Reconnect when you next need it.")
