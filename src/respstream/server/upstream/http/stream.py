"""A lean HTTP/1.1 client for the upstream hot path: a streaming ``POST`` whose response body is read piece by piece
(and the odd ``GET /models`` on the same connections).

Why: per upstream chunk, httpx + httpcore + anyio spent ~17 µs of CPU just handing the bytes over (stream wrappers,
a per-read timeout scope, generator layers), several times what the gateway spends on the event itself
(docs/benchmarks.md). Here a read is one ``data_received`` callback that de-chunks into a buffer and wakes the one
waiting reader (:mod:`~respstream.server.upstream.http.connection`): no per-read timer, no per-read allocation
beyond the bytes. This module is the client around it: the pool, requests and responses, timeouts.

What it does: HTTP/1.1 only (what every Chat Completions server speaks), ``http`` and ``https`` (the system CA
store, certifi's when installed), ``Content-Length``, ``chunked`` and close-delimited bodies, ``gzip``/``deflate``
bodies (decoded; anything else is refused), keep-alive connections kept per host for ``keepalive_expiry`` seconds
and reused only when the previous body was read to its end. A request sent into a kept-alive connection the server
had just closed is retried once on a fresh one (nothing was received, so nothing is repeated).
Idle timeout: one timer per response, re-armed lazily from the time of the last bytes, not per read.

Errors are :class:`HTTPStreamError` subclasses, each saying what happened; the adapter maps them to
``UpstreamError`` codes. Limits: a response head of at most 64 KiB, a chunk-size line of at most 1 KiB;
``max_buffer`` bytes read ahead of the consumer before the socket is paused.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from respstream.server.tls import client_tls_context
from respstream.server.upstream.http.connection import (
    ConnectError,
    ConnectTimeout,
    HTTPStreamError,
    IdleTimeout,
    ProtocolError,
    UpstreamConnection,
)

__all__ = ["ConnectError", "ConnectTimeout", "HTTPStreamError", "IdleTimeout", "LeanHTTP", "ProtocolError",
           "StreamResponse"]

@functools.lru_cache(maxsize=256)
def _target(url: str) -> tuple[tuple[str, str, int], str, str]:
    """``((scheme, host, port), request target, Host header)`` of ``url`` (an upstream's few URLs, parsed once)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        given = parts.port
    except ValueError:  # a port that is not a number, or out of range
        given = 0
    port = (443 if scheme == "https" else 80) if given is None else given
    if scheme not in ("http", "https") or not parts.hostname or not port:
        raise ConnectError(f"not an http(s) URL: {url!r}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (scheme, parts.hostname, port), target, parts.netloc.rsplit("@", 1)[-1]


class StreamResponse:
    """A response whose body is read with ``await read()`` (``b""`` at its end). Always ``await aclose()``."""

    def __init__(self, client: LeanHTTP, conn: UpstreamConnection, status: int, headers: dict[str, str],
                 idle_timeout: float) -> None:
        self._client = client
        self._conn = conn
        self.status_code = status
        self.headers = headers
        self._idle = idle_timeout
        self._timer: asyncio.TimerHandle | None = None
        self._released = False
        encoding = headers.get("content-encoding", "identity").strip().lower()
        self._inflate: zlib._Decompress | None = None
        if encoding in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(wbits=31)
        elif encoding == "deflate":
            self._inflate = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            raise ProtocolError(f"unsupported content-encoding {encoding!r}")

    def _on_idle(self) -> None:
        conn = self._conn
        left = conn.last_data + self._idle - time.monotonic()
        if left > 0.001:  # bytes came meanwhile: look again when the new interval would end
            self._timer = asyncio.get_running_loop().call_later(left, self._on_idle)
            return
        self._timer = None
        if conn.error is None and not conn.eof:
            conn.error = IdleTimeout(f"no data for {self._idle:g} s")
            conn._wake()

    async def read(self) -> bytes:
        """The next body bytes (whatever arrived; de-chunked, decoded), ``b""`` at the end. Raises
        :class:`HTTPStreamError`."""
        conn = self._conn
        while True:
            if conn.pieces:
                data = conn.take()
                if self._inflate is not None:
                    data = self._inflate.decompress(data)
                    if not data:
                        continue
                return data
            if conn.error is not None:
                raise conn.error
            if conn.eof:
                return self._inflate.flush() if self._inflate is not None else b""
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self._idle, self._on_idle)
            conn.waiter = asyncio.get_running_loop().create_future()
            try:
                await conn.waiter
            finally:
                conn.waiter = None

    async def read_direct(self, take: Callable[[bytes], bool]) -> bytes | None:
        """:meth:`read`, except that while it waits, each read of the body goes to ``take(data)`` right from the
        connection's data callback, and the reader's task is not woken: ``take`` returns True when it dealt with
        the bytes in full. When it returns False it has kept what the reader must see, and this returns None. What
        is already buffered, the body's end, errors and compressed bodies take :meth:`read`'s path. ``take`` must
        not raise."""
        conn = self._conn
        if self._inflate is not None or conn.pieces or conn.error is not None or conn.eof:
            return await self.read()
        loop = asyncio.get_running_loop()
        if self._timer is None:
            self._timer = loop.call_later(self._idle, self._on_idle)
        conn.waiter = loop.create_future()
        conn.direct = take
        try:
            await conn.waiter
        finally:
            conn.waiter = None
            conn.direct = None
        if conn.handed:
            conn.handed = False
            return None
        return await self.read()

    @property
    def complete(self) -> bool:
        """The whole body has been read (its end parsed, nothing left to take): closing gives the connection back."""
        conn = self._conn
        return conn.eof and conn.error is None and not conn.pieces and (self._inflate is None or self._inflate.eof)

    async def read_all(self, limit: int) -> bytes:
        """The rest of the body, at most about ``limit`` bytes (an error body); never raises."""
        out = b""
        try:
            while len(out) <= limit and (part := await self.read()):
                out += part
        except HTTPStreamError:
            pass
        return out

    async def aclose(self) -> None:
        """Give the connection back when its body was read to the end, else close it. Never raises."""
        if self._released:
            return
        self._released = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        conn = self._conn
        if conn.eof and conn.reusable and not conn.closed and conn.error is None and not conn.pieces:
            self._client._put_back(conn)
        elif conn.transport is not None:
            conn.transport.abort()


def _head_overdue(head: asyncio.Future[Any], seconds: float) -> None:
    if not head.done():
        head.set_exception(IdleTimeout(f"no response head for {seconds:g} s"))


_HEADS_KEPT = 64  # request heads remembered per client (see LeanHTTP._head)


class LeanHTTP:
    """Keep-alive connections per (scheme, host, port), for streaming ``post`` requests."""

    def __init__(self, *, connect_timeout: float, idle_timeout: float, keepalive_expiry: float = 4.0,
                 max_idle_per_host: int = 32, max_buffer: int = 1 << 20) -> None:
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.keepalive_expiry = keepalive_expiry
        self.max_idle_per_host = max_idle_per_host
        self.max_buffer = max_buffer
        self._idle: dict[tuple[str, str, int], list[UpstreamConnection]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._closed = False
        # (method, url, headers) -> (pool key, head before content-length, head after it): an upstream sends the
        # same few heads, each built (URL parsed, lines joined, encoded) once; bounded for traced heads, which vary.
        self._heads: dict[tuple[str, ...], tuple[tuple[str, str, int], bytes, bytes]] = {}

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = client_tls_context()
        return self._ssl

    def _put_back(self, conn: UpstreamConnection) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if self._closed or len(idle) >= self.max_idle_per_host:
            assert conn.transport is not None
            conn.transport.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    def _pooled(self, key: tuple[str, str, int]) -> UpstreamConnection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since > self.keepalive_expiry:
                conn.transport.close()  # the server may be closing it right now: never send into it
                continue
            return conn
        return None

    async def _connect(self, key: tuple[str, str, int]) -> UpstreamConnection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        conn = UpstreamConnection(key, self.max_buffer)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await loop.create_connection(lambda: conn, host, port,
                                             ssl=self._ssl_context() if scheme == "https" else None)
        except TimeoutError:
            raise ConnectTimeout(f"connect timeout after {self.connect_timeout:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(str(exc) or type(exc).__name__) from None
        return conn

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> StreamResponse:
        """Send ``POST url`` and wait for the response head. Raises :class:`HTTPStreamError`."""
        return await self.request("POST", url, body, headers)

    async def request(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> StreamResponse:
        """Send ``method url`` (with ``body``) and wait for the response head. Raises :class:`HTTPStreamError`."""
        key, before, after = self._head(method, url, headers)
        length = b"content-length: %d\r\n" % len(body) if body or method not in ("GET", "HEAD") else b""
        request = b"".join((before, length, after, body))
        for attempt in (0, 1):
            conn = self._pooled(key)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key)
            conn.send(request)
            head = conn.head
            assert head is not None
            # One timer on the head itself: a timeout scope (its context manager, its task bookkeeping) cost more
            # than the rest of the wait, on every request.
            timer = asyncio.get_running_loop().call_later(self.idle_timeout, _head_overdue, head, self.idle_timeout)
            try:
                status, response_headers = await head
            except IdleTimeout:
                if conn.transport is not None:
                    conn.transport.abort()
                raise
            except ProtocolError:
                if reused and attempt == 0 and not conn.received:
                    continue  # a stale kept-alive connection: nothing received, safe to send again
                raise
            except asyncio.CancelledError:
                if conn.transport is not None:
                    conn.transport.abort()
                raise
            finally:
                timer.cancel()
            try:
                return StreamResponse(self, conn, status, response_headers, self.idle_timeout)
            except ProtocolError:
                if conn.transport is not None:
                    conn.transport.abort()
                raise
        raise ProtocolError("the server closed the connection before answering")  # pragma: no cover

    def _head(self, method: str, url: str, headers: dict[str, str]) -> tuple[tuple[str, str, int], bytes, bytes]:
        """The request head of ``method url`` with ``headers``, split where its content-length goes."""
        cache_key = (method, url, *headers.keys(), *headers.values())
        head = self._heads.get(cache_key)
        if head is None:
            key, target, host_header = _target(url)
            lines = [f"{name}: {value}\r\n" for name, value in headers.items()
                     if name.lower() not in ("host", "content-length")]
            head = (key, f"{method} {target} HTTP/1.1\r\nhost: {host_header}\r\n".encode("latin-1"),
                    ("".join(lines) + "\r\n").encode("latin-1"))
            if len(self._heads) >= _HEADS_KEPT:
                self._heads.clear()
            self._heads[cache_key] = head
        return head

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
