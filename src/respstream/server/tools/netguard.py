"""Which network addresses ``web_fetch`` may connect to: public unicast only, unless an allow-list says otherwise.

Refused: loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16 — cloud metadata at
169.254.169.254 — and fe80::/10), multicast, reserved, unspecified, shared address space (100.64/10), and IPv6 forms
that embed one of those (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4, Teredo). The check runs on the
addresses a host name *resolves to*, so a public name pointing at 127.0.0.1 is refused too; the caller then connects
to the checked address (no second lookup an attacker could answer differently).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import SplitResult, urlunsplit

__all__ = ["AddressPolicy", "FetchRefused", "IPAddress", "is_public_address", "pinned_url", "resolve"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated ::a.b.c.d (RFC 4291 2.5.5.1)
# Never fetched, whatever the standard library's is_global says (its lists vary by Python version; 3.11 lets
# site-local fec0::/10 through). IPv4: RFC 6890 special-purpose blocks. IPv6: RFC 6890 / IANA special registry,
# plus site-local (RFC 3879), local-use NAT64 (RFC 8215), documentation 3fff::/20 (RFC 9637) and SRv6 SIDs.
_DENY = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24",
    "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
    "::/128", "::1/128", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20", "5f00::/16",
    "64:ff9b:1::/48", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
))  # fmt: skip


class FetchRefused(PermissionError):
    """The target address is not allowed (message names host and address)."""


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def is_public_address(ip: IPAddress) -> bool:
    """True for globally routable unicast addresses (after unwrapping IPv4 embedded in IPv6: mapped, compatible,
    NAT64, 6to4, Teredo). Anything in ``_DENY`` is refused first."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None and not is_public_address(inner):
            return False
        if ip.ipv4_mapped is not None:
            return True
        if ip.teredo is not None or ip.sixtofour is not None:
            return False  # tunnels to elsewhere: the outer address says nothing about where the packet ends up
    if any(ip.version == net.version and ip in net for net in _DENY):
        return False
    return bool(
        ip.is_global
        and not ip.is_multicast
        and not ip.is_reserved
        and not ip.is_loopback
        and not ip.is_link_local
        and not ip.is_unspecified
        and not ip.is_private
    )


class AddressPolicy:
    """``allow``: CIDR networks (``127.0.0.1/32``, ``10.0.0.0/8``) or exact host names that are always permitted."""

    def __init__(self, allow: Iterable[str] = ()) -> None:
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self.hosts: set[str] = set()
        for entry in allow:
            entry = entry.strip()
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.hosts.add(entry.lower().rstrip("."))

    def allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)

    def check(self, host: str, addresses: list[IPAddress]) -> None:
        """Raises :class:`FetchRefused` unless every address is public or allowed."""
        if not addresses:
            raise FetchRefused(f"{host}: no addresses")
        if host.lower().rstrip(".") in self.hosts:
            return
        for ip in addresses:
            if not is_public_address(ip) and not self.allowed(ip):
                raise FetchRefused(
                    f"refusing to fetch {host}: it resolves to {ip}, a private, loopback, link-local or reserved "
                    "address (allow it explicitly in tools.fetch_allow)"
                )


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an IP literal resolves to itself). Raises OSError when it does not."""
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return [ipaddress.ip_address(literal.split("%")[0])]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(literal, port, type=socket.SOCK_STREAM)
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if ip not in out:
            out.append(ip)
    return out


def pinned_url(parts: SplitResult, ip: IPAddress, port: int) -> str:
    """``parts`` with the host replaced by the checked ``ip``: the connection goes where the policy looked (the caller
    keeps the name in the ``Host`` header and, for https, in TLS SNI via the ``sni_hostname`` extension)."""
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    default = 443 if parts.scheme == "https" else 80
    netloc = host if port == default else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
