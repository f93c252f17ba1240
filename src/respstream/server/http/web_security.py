"""Browser-facing protections (docs/security.md): security headers, and Host/Origin checks on the open gateway.

**Headers.** Every response gets ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``. The
playground (``/`` and ``/static/...``) also gets :data:`PLAYGROUND_CSP` and ``X-Frame-Options: DENY``: the page keeps
the API key in ``sessionStorage``, so no other origin may frame it and no script but its own may run. The CSP is the
one place to change when the page changes (it loads only same-origin module scripts and stylesheets, no inline
script or style element, and talks to its own origin with fetch / EventSource / WebSocket).

**Open gateway (no API keys).** Anything that can reach the port is trusted, so the browser must not be a way in:

- DNS rebinding: a request whose ``Host`` is not a loopback name (``localhost``, ``*.localhost``, ``127.x.x.x``,
  ``[::1]``) gets ``421 host_not_allowed``. A rebound attacker's name never matches.
- Cross-origin writes: a ``POST``/``DELETE``/``PUT``/``PATCH`` with an ``Origin`` other than the gateway's own
  gets ``403 cross_origin_request``; a ``POST`` with a body must say ``Content-Type: application/json`` (a
  cross-origin page can only send that after a CORS preflight, which the gateway never grants).
- WebSocket upgrades (``/v1/responses`` WebSocket mode): the same Host check, and any ``Origin`` other than the
  gateway's own page is refused, both with 403 before the handshake is accepted (:func:`check_open_websocket`).

A keyed gateway skips these checks: a browser cannot attach ``Authorization`` cross-origin without a preflight.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from functools import lru_cache

from respstream.server.http_errors import HTTPError

__all__ = ["COMMON_HEADERS", "PLAYGROUND_CSP", "PLAYGROUND_HEADERS", "check_open_request", "check_open_websocket",
           "is_loopback_host"]

PLAYGROUND_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
COMMON_HEADERS: list[tuple[bytes, bytes]] = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
PLAYGROUND_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", PLAYGROUND_CSP.encode()),
    (b"x-frame-options", b"DENY"),
]
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _split_host(host: str) -> str:
    """``host[:port]`` or ``[v6][:port]`` -> the name/address, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_host(host: str) -> bool:
    if len(host) <= 300:  # every request asks: a real Host header is short and one of a few
        return _is_loopback_cached(host)
    return _is_loopback(host)


def _is_loopback(host: str) -> bool:
    name = _split_host(host).rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


_is_loopback_cached = lru_cache(maxsize=256)(_is_loopback)


def _check_host(host: str, status: int) -> None:
    if not is_loopback_host(host):
        raise HTTPError(status, "host_not_allowed",
                        f"Host {host[:100]!r} is not a loopback name; this gateway has no API keys and only answers "
                        "requests addressed to localhost, 127.0.0.1 or [::1] (DNS rebinding protection).")


def _check_origin(origin: bytes | None, allowed: tuple[str, ...], status: int, what: str) -> None:
    if origin is not None and origin.decode("latin-1").rstrip("/").lower() not in allowed:
        raise HTTPError(status, "cross_origin_request",
                        f"Origin {origin.decode('latin-1')[:100]!r} may not {what} this gateway (it has no API keys, "
                        "so only its own pages and non-browser clients may).")


def check_open_request(method: str, scheme: str, headers: Mapping[bytes, bytes]) -> None:
    """Raises :class:`HTTPError` for a request the open gateway must refuse (see the module docstring)."""
    host = headers.get(b"host", b"").decode("latin-1")
    _check_host(host, 421)
    if method not in _WRITES:
        return
    _check_origin(headers.get(b"origin"), (f"{scheme}://{host}".lower(),), 403, "write to")
    length = headers.get(b"content-length", b"0").strip()
    has_body = b"transfer-encoding" in headers or (length not in (b"", b"0"))
    ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if method == "POST" and has_body and ctype != b"application/json" and not ctype.endswith(b"+json"):
        raise HTTPError(415, "unsupported_media_type",
                        "Send the request body with 'Content-Type: application/json'.")


def check_open_websocket(scheme: str, headers: Mapping[bytes, bytes]) -> None:
    """Raises a 403 :class:`HTTPError` for a WebSocket handshake the open gateway must refuse, before it is accepted.

    Browsers apply no CORS to WebSockets: any page may open one to localhost and the handshake carries no key, so
    the Origin check covers every upgrade (not just writes). The page that may connect is the gateway's own,
    ``http(s)://<Host>`` (the ``ws``/``wss`` scheme of the upgrade maps to it); no ``Origin`` is a non-browser
    client and is allowed, as for HTTP. A non-loopback ``Host`` is refused as for HTTP (DNS rebinding); both with
    403, the status a refused handshake is commonly given."""
    host = headers.get(b"host", b"").decode("latin-1")
    _check_host(host, 403)
    page = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    _check_origin(headers.get(b"origin"), (f"{page}://{host}".lower(),), 403, "open a WebSocket to")
