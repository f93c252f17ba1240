"""``web_fetch``: GET one web page as text, with size and time limits and an address policy on every hop.

How this works: redirects are followed by hand (at most ``max_redirects``). For each hop the host is resolved, every
address is checked by :class:`~respstream.server.tools.netguard.AddressPolicy`, and the request is sent to the
*checked* IP (``Host`` header and TLS SNI keep the name), so DNS cannot be asked twice with different answers. The body
is read up to ``max_bytes``; HTML becomes plain text, other text types pass through, binary types are refused.
:func:`fetch_bytes` takes the same path for a file (an ``input_file`` ``file_url``): the bytes as they are, any type,
refused whole when larger than ``max_bytes`` (a cut file is useless).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

import httpx

from respstream.server.tls import client_tls_context
from respstream.server.tools.html_text import html_to_text
from respstream.server.tools.netguard import AddressPolicy, pinned_url, resolve

__all__ = ["FetchError", "FetchResult", "FetchedFile", "fetch_bytes", "fetch_url"]

_T = TypeVar("_T")

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml", "application/rss+xml")


class FetchError(Exception):
    """The page could not be fetched (bad URL, refused address, HTTP error, unsupported type). Says why."""


@dataclass(frozen=True)
class FetchResult:
    url: str
    status: int
    content_type: str
    title: str
    text: str
    truncated: bool

    def render(self, max_chars: int) -> str:
        text = self.text
        cut = len(text) > max_chars
        if cut:
            text = text[:max_chars]
        head = f"URL: {self.url}\nStatus: {self.status}\n" + (f"Title: {self.title}\n" if self.title else "")
        tail = "\n[truncated]" if cut or self.truncated else ""
        return f"{head}\n{text}{tail}"


@dataclass(frozen=True)
class FetchedFile:
    url: str
    content_type: str
    data: bytes


async def fetch_url(
    url: str,
    *,
    policy: AddressPolicy,
    max_bytes: int = 2 << 20,
    timeout: float = 10.0,
    max_redirects: int = 5,
    user_agent: str = "respstream-web-fetch/0.1",
    client: httpx.AsyncClient | None = None,
) -> FetchResult:
    """Fetch ``url``. Raises :class:`FetchError` or ``netguard.FetchRefused`` (never an httpx exception).

    ``client``: a shared client to reuse (it must not follow redirects itself); one is made per call otherwise.
    """
    if client is None:
        async with httpx.AsyncClient(verify=client_tls_context(), follow_redirects=False, trust_env=False) as own:
            return await _fetch(url, own, policy, max_bytes, timeout, max_redirects, user_agent, _read)
    return await _fetch(url, client, policy, max_bytes, timeout, max_redirects, user_agent, _read)


async def fetch_bytes(
    url: str, *, policy: AddressPolicy, max_bytes: int, timeout: float = 10.0, max_redirects: int = 5,
    user_agent: str = "respstream-file-fetch/0.1",
) -> FetchedFile:
    """Fetch ``url`` as bytes (any content type) through the same address policy. Raises :class:`FetchError` or
    ``netguard.FetchRefused``."""
    async with httpx.AsyncClient(verify=client_tls_context(), follow_redirects=False, trust_env=False) as own:
        return await _fetch(url, own, policy, max_bytes, timeout, max_redirects, user_agent, _read_bytes)


async def _fetch(
    url: str,
    client: httpx.AsyncClient,
    policy: AddressPolicy,
    max_bytes: int,
    timeout: float,
    max_redirects: int,
    user_agent: str,
    reader: Callable[[str, httpx.Response, int], Awaitable[_T]],
) -> _T:
    for _hop in range(max_redirects + 1):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise FetchError(f"only http and https URLs can be fetched, not {parts.scheme or 'a relative URL'!r}")
        host = parts.hostname
        if not host:
            raise FetchError(f"URL {url!r} has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise FetchError(f"URL {url!r} has an invalid port") from None
        try:
            addresses = await resolve(host, port)
        except OSError as exc:
            raise FetchError(f"cannot resolve {host}: {exc}") from None
        policy.check(host, addresses)
        ip = addresses[0]
        request = client.build_request(
            "GET",
            pinned_url(parts, ip, port),
            headers={"host": parts.netloc.rsplit("@", 1)[-1], "user-agent": user_agent, "accept": "*/*",
                     "accept-encoding": "gzip, deflate"},
            extensions={"sni_hostname": host} if parts.scheme == "https" else {},
            timeout=httpx.Timeout(timeout),
        )
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except httpx.HTTPError as exc:
            raise FetchError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
        try:
            if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
                url = urljoin(url, response.headers["location"])
                continue
            return await reader(url, response, max_bytes)
        finally:
            await response.aclose()
    raise FetchError(f"too many redirects (more than {max_redirects})")


async def _read_bytes(url: str, response: httpx.Response, max_bytes: int) -> FetchedFile:
    if response.status_code >= 400:
        raise FetchError(f"{url} answered HTTP {response.status_code}")
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    body = bytearray()
    decoder = _BoundedDecoder(response.headers.get("content-encoding", ""), max_bytes)  # inflated within budget
    try:
        async for part in response.aiter_raw():
            body += decoder.feed(part)
            if decoder.over:
                raise FetchError(f"{url} is larger than {max_bytes} bytes")
    except httpx.HTTPError as exc:
        raise FetchError(f"reading {url} failed: {type(exc).__name__}") from None
    return FetchedFile(url, content_type or "application/octet-stream", bytes(body))
class _BoundedDecoder:
    """Undoes ``Content-Encoding`` (identity, gzip, deflate) producing at most ``budget`` bytes in total, BEFORE they
    exist: ``zlib``'s ``max_length`` stops inflating at the budget, so a gzip bomb costs ``budget`` bytes of memory and
    the time to make them, never its full expansion (httpx's own decoder inflates each network chunk whole)."""

    def __init__(self, encoding: str, budget: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise FetchError(f"unsupported Content-Encoding {encoding!r} (gzip, deflate or none)")
        # wbits 47 reads a gzip or zlib header; "deflate" is zlib-wrapped by the RFC, raw in some servers (retried).
        self._inflate = zlib.decompressobj(47) if codings else None
        self._raw_deflate_fallback = codings == ["deflate"]
        self.encoding = encoding
        self.budget = budget
        self.over = False  # more data existed past the budget

    def feed(self, data: bytes) -> bytes:
        if self._inflate is None:
            taken = data[: self.budget]
            self.over = self.over or len(data) > len(taken)
            self.budget -= len(taken)
            return taken
        out = bytearray()
        while data and self.budget > 0:
            try:
                part = self._inflate.decompress(data, self.budget)
            except zlib.error as exc:
                if self._raw_deflate_fallback and not out:  # raw deflate fails on its first bytes
                    self._inflate, self._raw_deflate_fallback = zlib.decompressobj(-15), False
                    continue
                raise FetchError(f"the body is not valid {self.encoding} data: {exc}") from None
            self._raw_deflate_fallback = False
            out += part
            self.budget -= len(part)
            data = self._inflate.unconsumed_tail
            if self._inflate.eof:
                break
        if self.budget <= 0 and (data or not self._inflate.eof):
            self.over = True
        return bytes(out)


async def _read(url: str, response: httpx.Response, max_bytes: int) -> FetchResult:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if response.status_code >= 400:
        raise FetchError(f"{url} answered HTTP {response.status_code}")
    if content_type and not content_type.startswith(_TEXT_TYPES):
        raise FetchError(f"{url} is {content_type}, not a text page")
    decoder = _BoundedDecoder(response.headers.get("content-encoding", ""), max_bytes)
    body = bytearray()
    try:
        async for part in response.aiter_raw():
            body += decoder.feed(part)
            if decoder.over:
                break
    except httpx.HTTPError as exc:
        raise FetchError(f"reading {url} failed: {type(exc).__name__}") from None
    text = bytes(body).decode(response.charset_encoding or "utf-8", "replace")
    title = ""
    if content_type in ("text/html", "application/xhtml+xml") or (not content_type and "<html" in text[:500].lower()):
        # Linear, but up to max_bytes of it: in a worker thread so the event loop (and the tool timeout) keep running.
        title, text = await asyncio.to_thread(html_to_text, text)
    return FetchResult(url, response.status_code, content_type, title, text, decoder.over)
