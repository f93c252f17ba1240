"""Connections per client address: :class:`PeerConnections` (sans-IO; the connection guard in http_guard.py uses it).

Why: ``max_connections`` is one pool for everybody. A single client that re-opened 1,000 half-sent request heads
every 10 s (slowloris) kept it full, and 46 of 55 ``/healthz`` requests of everybody else were refused. Two rules
keep one client from starving the others:

- Fairness when the pool is full: a new connection from a client that holds fewer connections than the biggest
  client takes the place of one of the biggest client's connections that has not sent a request head yet (the
  oldest such); the biggest client's own new connections are refused. A lone client (a load test) can still use
  the whole pool, and a stream in progress is never cut for anybody.
- ``max_connections_per_client`` (0: off): a hard cap per client, pool full or not.

A client is its IPv4 address, or the /64 network of its IPv6 address (one host routinely owns a whole /64, so a
cap per IPv6 address would be a cap per nothing). Addresses in ``trusted_proxies`` are not counted: behind a
reverse proxy every client arrives from the proxy's address, and the proxy is the one to limit them.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Hashable, Iterable

__all__ = ["PeerConnections", "client_key"]


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


class PeerConnections:
    """Open connections per client: at most ``limit`` each (0: no cap), none counted for ``exempt`` (CIDRs)."""

    __slots__ = ("_exempt", "_open", "counting", "limit")

    def __init__(self, limit: int = 0, exempt: Iterable[str] = (), *, counting: bool = True) -> None:
        self.limit = limit
        self.counting = counting  # False: no bookkeeping at all (a protocol class built without these limits)
        self._open: dict[str, dict[Hashable, None]] = {}  # client -> its connections, oldest first
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
        return client_key(host)

    def enter(self, key: str, conn: Hashable, *, pool_full: bool,
              replaceable: Callable[[Hashable], bool]) -> tuple[bool, Hashable | None]:
        """Admit ``conn`` of client ``key``? Returns (admitted, a connection to close to make room or None).
        ``pool_full``: the pool has no room left; ``replaceable(c)``: whether ``c`` may be closed for a newcomer
        (it has sent no request head yet)."""
        mine = self._open.get(key) if key else None
        held = len(mine) if mine else 0
        if key and self.limit and held >= self.limit:
            return False, None
        victim: Hashable | None = None
        if pool_full:
            victim = self._victim(held, replaceable) if key else None
            if victim is None:
                return False, None
        if key:
            self._open.setdefault(key, {})[conn] = None
        return True, victim

    def _victim(self, held: int, replaceable: Callable[[Hashable], bool]) -> Hashable | None:
        """The oldest replaceable connection of the client holding the most, if it holds more than ``held`` + 1."""
        if not self._open:
            return None
        biggest = max(self._open.values(), key=len)
        if len(biggest) <= held + 1:
            return None
        return next((c for c in biggest if replaceable(c)), None)

    def leave(self, key: str, conn: Hashable) -> None:
        mine = self._open.get(key)
        if mine is None:
            return
        mine.pop(conn, None)
        if not mine:
            del self._open[key]

    def open(self, host: str) -> int:
        """Connections counted for ``host``'s client now."""
        return len(self._open.get(client_key(host), ()))
