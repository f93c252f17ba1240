"""Connections per client: :class:`PeerConnections` (sans-IO; the connection guard in http_guard.py uses it).

Why: ``max_connections`` is one pool for everybody. A single client that re-opened 1,000 half-sent request heads
every 10 s (slowloris) kept it full and 46 of 55 ``/healthz`` requests of everybody else were refused (issue 30).
The first fix made room for a newcomer only when one client held more than one connection above it, so the same
attack spread over 1,000 addresses with one connection each kept ``/healthz`` failing (issue 42, H7v), and 60 idle
WebSockets, which were never replaceable, blocked it too (M8). The rules now:

- Connections that make no progress are known: one waiting for its request head (new, slow, or an idle keep-alive
  connection between requests) and an upgraded WebSocket waiting idle for its next message (the WebSocket session
  says so, socket_reclaim.py). :meth:`PeerConnections.waiting` and :meth:`PeerConnections.working` keep them in
  the order they stopped making progress, the longest first.
- When the pool is full, a newcomer takes the place of one of them: first of a client holding more than its fair
  share (``max_connections`` / clients with connections), else the one waiting longest, of any client that holds at
  least as many connections as the newcomer's client will. So a client never gains a slot from a smaller one, a
  lone client (a load test) can still use the whole pool, a well-behaved newcomer (it sends its head at once and
  then waits for nobody) is served, and a request or a WebSocket turn in progress is never cut. Only the
  ``SCAN`` longest-waiting connections are looked at, so a newcomer costs a bounded amount of work.
- A client whose new connection was closed because its head never came (it wasted a slot: slowloris) may not take
  anybody's slot for ``penalty_seconds`` (it is refused while the pool is full; it still gets room that is free).
  Without this, 1,000 attacker addresses re-opening what was closed replaced the waiting line every ~0.1 s, and a
  newcomer on a loaded machine could be replaced before its head arrived; now the line turns over at most once per
  attacker address per ``penalty_seconds``. An idle keep-alive connection or WebSocket that gives way (it served a
  request before) costs its client nothing.
- ``max_connections_per_client`` (0: off): a hard cap per client, pool full or not.

A client is its IPv4 address; an IPv6 address is counted by its /64 (one host routinely owns a whole /64), and by
its /48 once ``ipv6_subnets`` /64s of that /48 hold connections (a /48 is 65,536 /64s: one site, one client).
Addresses in ``trusted_proxies`` are not counted: behind a reverse proxy every client arrives from the proxy's
address, and the proxy is the one to limit them. Connections are accepted before any request is read, so a
client is an address block, until an upgraded WebSocket's session knows its API key: from then on the socket
counts for its key (:meth:`PeerConnections.rekey`), so one key's sockets from many addresses are one client.
"""

from __future__ import annotations

import functools
import ipaddress
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

__all__ = ["PeerConnections", "client_key"]

SCAN = 512  # longest-waiting connections looked at for a newcomer (a bounded cost per accepted connection)
PENALIZED_CLIENTS = 65_536  # clients remembered as having wasted a slot (the longest ago forgotten first)


@functools.lru_cache(maxsize=4096)  # parsing an address was 7 of 8.6 us a connection; 1.6 us with this
def client_key(host: str) -> str:
    """The address a per-client limit counts ``host`` under: itself (IPv4), its /64 (IPv6), or ``host`` as given
    when it is not an IP address (a Unix socket's peer)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@functools.lru_cache(maxsize=4096)
def _site_of(key: str) -> str | None:
    """The /48 of an IPv6 /64 client key, None for any other key."""
    if not key.endswith("/64"):
        return None
    return str(ipaddress.IPv6Network(key, strict=False).supernet(new_prefix=48))


def _always(conn: Hashable) -> bool:
    return True


class PeerConnections:
    """Open connections per client: at most ``limit`` each (0: no cap), none counted for ``exempt`` (CIDRs);
    ``capacity``: the pool's size (``max_connections``), for the fair share."""

    __slots__ = ("_exempt", "_fresh", "_open", "_penalized", "_sites", "_waiting", "capacity", "counting",
                 "ipv6_subnets", "limit", "penalty_seconds")

    def __init__(self, limit: int = 0, exempt: Iterable[str] = (), *, counting: bool = True, capacity: int = 0,
                 ipv6_subnets: int = 8, penalty_seconds: float = 30.0) -> None:
        self.limit = limit
        self.penalty_seconds = penalty_seconds
        self.capacity = capacity
        self.ipv6_subnets = ipv6_subnets
        self.counting = counting  # False: no bookkeeping at all (a protocol class built without these limits)
        self._open: dict[str, dict[Hashable, None]] = {}  # client -> its connections, oldest first
        self._waiting: dict[Hashable, str] = {}  # connection making no progress -> its client, longest first
        self._fresh: set[Hashable] = set()  # waiting connections that never made progress (no request head yet)
        self._penalized: OrderedDict[str, float] = OrderedDict()  # client -> when it last wasted a slot
        self._sites: dict[str, set[str]] = {}  # IPv6 /48 -> its /64 clients holding connections
        self._exempt: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for cidr in exempt:
            if cidr.strip() == "*":  # every peer is a trusted proxy: no address says who the client is
                self.counting = False
                continue
            try:
                self._exempt.append(ipaddress.ip_network(cidr.strip(), strict=False))
            except ValueError:
                continue  # not an address (uvicorn takes a Unix socket path or a hostname here): never a peer IP

    def _is_exempt(self, host: str) -> bool:
        if not self._exempt:
            return False
        try:
            address = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        return any(address in network for network in self._exempt)

    def key_for(self, host: str | None) -> str:
        """The client ``host`` is counted as ("" for one that is not counted)."""
        if not self.counting or host is None or self._is_exempt(host):
            return ""
        key = client_key(host)
        site = _site_of(key)
        if site is not None and key not in self._open and len(self._sites.get(site, ())) >= self.ipv6_subnets:
            return site  # a crowded /48: its further /64s are one client
        return key

    def enter(self, key: str, conn: Hashable, *, pool_full: bool, replaceable: Callable[[Hashable], bool] = _always,
              now: float = 0.0) -> tuple[bool, Hashable | None]:
        """Admit ``conn`` of client ``key``? Returns (admitted, a connection to close to make room or None).
        ``pool_full``: the pool has no room left; ``replaceable(c)``: whether a waiting ``c`` may still be closed
        (it is not closing already); ``now``: a monotonic clock's seconds (for the penalty)."""
        mine = self._open.get(key) if key else None
        held = len(mine) if mine else 0
        if key and self.limit and held >= self.limit:
            return False, None
        victim: Hashable | None = None
        if pool_full:
            wasted = self._penalized.get(key) if key else None
            if wasted is not None and now - wasted < self.penalty_seconds:
                return False, None  # it wasted a slot lately: it takes nobody's
            victim = self._victim(held, replaceable) if key else None
            if victim is None:
                return False, None
            victim_key = self._waiting.pop(victim)  # chosen once: it is being closed
            if victim in self._fresh:  # its head never came: its client wasted a slot
                self._fresh.discard(victim)
                self._penalized[victim_key] = now
                self._penalized.move_to_end(victim_key)
                if len(self._penalized) > PENALIZED_CLIENTS:
                    self._penalized.popitem(last=False)
        if key:
            if mine is None:
                mine = self._open[key] = {}
                site = _site_of(key)
                if site is not None:
                    self._sites.setdefault(site, set()).add(key)
            mine[conn] = None
        return True, victim

    def _victim(self, held: int, replaceable: Callable[[Hashable], bool]) -> Hashable | None:
        """A waiting connection of a client over its fair share, else the longest waiting, of a client holding at
        least ``held`` + 1 connections (see the module's docstring)."""
        fair = self.capacity / len(self._open) if self.capacity and self._open else float("inf")
        fallback: Hashable | None = None
        for looked, (conn, key) in enumerate(self._waiting.items()):
            if looked >= SCAN:
                break
            count = len(self._open.get(key, ()))
            if count <= held or not replaceable(conn):
                continue
            if count > fair:
                return conn
            if fallback is None:
                fallback = conn
        return fallback

    def waiting(self, key: str, conn: Hashable, *, fresh: bool = False) -> None:
        """``conn`` of client ``key`` stopped making progress (it waits for a request head or, upgraded, idles):
        it may make room for a newcomer. Its place in the line is now (the end). ``fresh``: a new connection that
        has sent nothing yet (closing it for a newcomer penalises its client)."""
        if key and conn in self._open.get(key, ()):
            self._waiting.pop(conn, None)
            self._waiting[conn] = key
            if fresh:
                self._fresh.add(conn)

    def working(self, conn: Hashable) -> None:
        """``conn`` made progress (a whole request head, a WebSocket message): it is not closed for others."""
        self._waiting.pop(conn, None)
        self._fresh.discard(conn)

    def is_waiting(self, conn: Hashable) -> bool:
        return conn in self._waiting

    def rekey(self, conn: Hashable, old: str, new: str) -> None:
        """Count ``conn`` for client ``new`` from now on, keeping its place in the line of waiting connections
        (an upgraded WebSocket once its session knows its API key: a key's sockets are one client, whatever their
        addresses)."""
        if old == new or not old or not new or conn not in self._open.get(old, ()):
            return
        self._drop(old, conn)
        self._open.setdefault(new, {})[conn] = None
        if conn in self._waiting:
            self._waiting[conn] = new  # an existing key keeps its place in the dict's order

    def leave(self, key: str, conn: Hashable) -> None:
        self._waiting.pop(conn, None)
        self._fresh.discard(conn)
        self._drop(key, conn)

    def _drop(self, key: str, conn: Hashable) -> None:
        mine = self._open.get(key)
        if mine is None:
            return
        mine.pop(conn, None)
        if not mine:
            del self._open[key]
            site = _site_of(key)
            if site is not None and (subnets := self._sites.get(site)) is not None:
                subnets.discard(key)
                if not subnets:
                    del self._sites[site]

    def open(self, host: str) -> int:
        """Connections counted for ``host``'s client now."""
        return len(self._open.get(client_key(host), ()))
