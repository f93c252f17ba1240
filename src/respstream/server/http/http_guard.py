"""Connection-level limits uvicorn does not have: a request read deadline and a connection cap (docs/security.md).

Why: uvicorn's ``timeout_keep_alive`` only runs between requests, so a client that opens a connection and sends its
headers one byte a minute (slowloris), or nothing at all, holds a socket and a file descriptor forever, before any
authentication can run. 20,000 such idle connections exhausted the gateway's descriptors, ``/healthz`` failed, and
the accept loop logged "out of system resource" 484 MB in 60 s.

:class:`GuardedH11Protocol` (uvicorn's h11 protocol, subclassed) arms a deadline when a connection opens and again
when a response completes; it is cleared only once the whole request (head and body) has arrived. A connection
that misses it is closed, silently. A shorter deadline, ``header_timeout_seconds``, holds for the request head
alone. Past ``max_connections`` open connections, or ``max_connections_per_client`` from one client address
(peer_limit.py: one slowloris client filled the whole pool and ``/healthz`` failed for everybody), a new connection
is closed at once (it costs no request, no log line), unless it can take the place of a connection that makes no
progress (peer_limit.py: a head that does not come, an idle keep-alive connection, an idle WebSocket). A connection
upgraded to a WebSocket keeps its client's slot until it closes; while idle it may be reclaimed under pressure
(socket_reclaim.py: its session closes it with code 1013, saying why). :func:`quiet_accept_errors` rate-limits
asyncio's accept-error log to one line per interval, so an exhausted descriptor table cannot fill the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from respstream.server.http import socket_reclaim
from respstream.server.http.peer_limit import PeerConnections

__all__ = ["DISCONNECT_HOOK", "GuardedH11Protocol", "GuardedHttpToolsProtocol", "guarded_protocol",
           "quiet_accept_errors"]

# A request's ``scope["state"]`` key the httptools protocol offers (None): a response that sets a callable there has it
# called when the client goes away before the response is complete, instead of watching ``receive()`` from a task of
# its own (sse_response.py: one task per stream fewer, issue 41). False: the client has already gone.
DISCONNECT_HOOK = "respstream.on_disconnect"


class _ReadDeadline:
    """The deadline and the cap, for either uvicorn protocol (mixed in before it): ``_read_timed_out`` says whether
    the connection is still reading its request, which each protocol knows in its own terms."""

    request_timeout: float = 10.0
    header_timeout: float = 0.0
    max_connections: int = 1000
    peers: PeerConnections = PeerConnections(counting=False)  # per server (guarded_protocol): per client address
    _read_deadline: asyncio.TimerHandle | None = None
    _head_deadline: asyncio.TimerHandle | None = None
    _reading_head = False  # no request head yet (a new or idle keep-alive connection): it may make room for others
    _peer_key = ""
    connections: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        peer = transport.get_extra_info("peername")
        key = self.peers.key_for(peer[0] if isinstance(peer, tuple) and peer else None)
        admitted, victim = self.peers.enter(key, self, pool_full=len(self.connections) > self.max_connections,
                                            replaceable=_not_closing, now=self.loop.time())
        if not admitted:
            transport.abort()  # over the cap (or this client's share): no request is read, nothing is logged
            return
        self._peer_key = key
        if isinstance(victim, _ReadDeadline):
            _make_room(victim, self.loop)
        self._arm(fresh=True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._release_peer()
        super().connection_lost(exc)  # type: ignore[misc]
        cycle = getattr(self, "cycle", None)
        if cycle is not None and cycle.disconnected:  # (set by uvicorn when the response was not complete)
            state = cycle.scope.get("state", {})
            hook = state.get(DISCONNECT_HOOK)
            if DISCONNECT_HOOK in state:
                state[DISCONNECT_HOOK] = False  # gone: a response that starts later watches receive() instead
            if hook:
                hook()

    def _release_peer(self) -> None:
        key, self._peer_key = self._peer_key, ""
        if key:
            self.peers.leave(key, self)

    def _hand_over_peer(self) -> None:
        """After a WebSocket upgrade the new protocol owns the transport (this one never hears of its end): its
        ``connection_lost`` gives the client's slot back."""
        key, self._peer_key = self._peer_key, ""
        if not key:
            return
        protocol = self.transport.get_protocol()
        ended = protocol.connection_lost
        peers = self.peers
        peername = self.transport.get_extra_info("peername")
        socket_reclaim.track(peername, self, key, peers)  # its session says when it idles (reclaimable)

        def connection_lost(exc: Exception | None) -> None:
            peers.leave(socket_reclaim.forget(peername) or key, self)  # its API key's client, once its session knew
            ended(exc)

        protocol.connection_lost = connection_lost  # type: ignore[method-assign]

    def _arm(self, *, fresh: bool = False) -> None:
        """Arm the deadlines for the next request (``fresh``: the connection's first, nothing sent yet)."""
        self._disarm()
        if self.request_timeout > 0:
            self._read_deadline = self.loop.call_later(self.request_timeout, self._read_timed_out)
        self._reading_head = True
        self.peers.waiting(self._peer_key, self, fresh=fresh)  # no progress until its head is in: it may give way
        if self.header_timeout > 0:
            self._head_deadline = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None
        self._head_done()

    def _head_done(self) -> None:
        self._reading_head = False
        self.peers.working(self)
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None  # cleared when the head is in, so a run means it is not
        if not self.transport.is_closing():
            self.transport.abort()

    def _still_reading(self) -> bool:
        raise NotImplementedError

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self._still_reading() and not self.transport.is_closing():
            self.transport.abort()


def _not_closing(conn: object) -> bool:
    return isinstance(conn, _ReadDeadline) and not conn.transport.is_closing()


RECLAIM_GRACE_SECONDS = 5.0  # an idle WebSocket asked to close that has not closed by then is cut


def _make_room(victim: _ReadDeadline, loop: asyncio.AbstractEventLoop) -> None:
    """Close ``victim`` for a newcomer: an idle WebSocket through its session (a close frame saying why), any other
    connection (its head has not come) at once."""
    transport = victim.transport
    if socket_reclaim.reclaim(victim):
        loop.call_later(RECLAIM_GRACE_SECONDS, lambda: None if transport.is_closing() else transport.abort())
    else:
        transport.abort()


class GuardedH11Protocol(_ReadDeadline, H11Protocol):  # type: ignore[misc]
    """uvicorn's h11 protocol with a request read deadline and a connection cap (class attributes, set per server
    by :func:`guarded_protocol`)."""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.SWITCHED_PROTOCOL, h11._state.MIGHT_SWITCH_PROTOCOL):
            self._disarm()  # the whole request is in: the app's own limits apply from here
        elif state is not h11.IDLE:
            self._head_done()  # the head is in; the body has the rest of request_timeout

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm()  # the WebSocket protocol takes the connection over, with its own limits
        super().handle_websocket_upgrade(event)
        self._hand_over_peer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this keep-alive connection gets its own deadline

    def _still_reading(self) -> bool:
        # A request that is fully in and being answered is not ours to cut.
        return not (self.cycle is not None and not self.cycle.response_complete
                    and self.conn.their_state is h11.DONE)


def _httptools_guard() -> type[Any] | None:
    """The same guard over uvicorn's httptools protocol (the ``fast`` stack), or None without httptools."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class _Guarded(_ReadDeadline, HttpToolsProtocol):  # type: ignore[misc]
        _answering = False

        def handle_websocket_upgrade(self) -> None:
            self._disarm()  # the WebSocket protocol takes the connection over, with its own limits
            super().handle_websocket_upgrade()
            self._hand_over_peer()

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._head_done()
            if self.cycle is not None:  # (None for a WebSocket upgrade)
                self.cycle.scope.setdefault("state", {})[DISCONNECT_HOOK] = None

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._answering = True
            self._disarm()  # the whole request is in

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._answering = False
            if not self.transport.is_closing():
                self._arm()

        def _still_reading(self) -> bool:
            return not self._answering

    return _Guarded


GuardedHttpToolsProtocol = _httptools_guard()


def guarded_protocol(*, request_timeout: float, max_connections: int, http: str = "h11",
                     header_timeout: float = 0.0, max_connections_per_client: int = 0,
                     exempt: Iterable[str] = ()) -> type[Any]:
    """A guarded protocol class for uvicorn's ``http`` implementation ``h11`` or ``httptools``, carrying these
    limits (uvicorn takes a protocol class). ``exempt``: addresses/CIDRs without a per-client cap (the proxies)."""
    base: type[Any] | None = GuardedHttpToolsProtocol if http == "httptools" else GuardedH11Protocol
    if base is None:
        base = GuardedH11Protocol
    return type("GatewayHttpProtocol", (base,), {"request_timeout": request_timeout,
                                                 "header_timeout": header_timeout,
                                                 "max_connections": max_connections,
                                                 "peers": PeerConnections(max_connections_per_client, exempt,
                                                                          capacity=max_connections)})


class _RateLimitedRecords(logging.Filter):
    """Lets one record containing ``needle`` through per ``interval`` seconds; drops the rest (others pass)."""

    def __init__(self, needle: str, interval: float) -> None:
        super().__init__()
        self.needle = needle
        self.interval = interval
        self._last = -float("inf")
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.needle not in str(record.msg):
            return True
        now = time.monotonic()
        if now - self._last < self.interval:
            self.dropped += 1
            return False
        self._last = now
        if self.dropped:
            record.msg = f"{record.msg} ({self.dropped} more like it in the last {self.interval:g} s not logged)"
            self.dropped = 0
        return True


# uvicorn's own records that a peer can cause at line rate: asyncio's accept errors when descriptors run out, and
# the sansio WebSocket stack's "returned without completing handshake", which it logs after every handshake the
# app refused with a denial response (401, 403) although that response was sent.
_NOISY = (("asyncio", "accept"), ("uvicorn.error", "without completing handshake"))


def quiet_accept_errors(interval: float = 10.0) -> None:
    """Rate-limit the log records a peer can cause at will (:data:`_NOISY`) to one per ``interval`` (idempotent)."""
    for name, needle in _NOISY:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RateLimitedRecords) and f.needle == needle for f in logger.filters):
            logger.addFilter(_RateLimitedRecords(needle, interval))
