"""A lean HTTP/1.1 client for the upstream hot path: a streaming ``POST`` whose response body is read piece by piece
(and the odd ``GET /models`` on the same connections).

Why: per upstream chunk, httpx + httpcore + anyio spent ~17 µs of CPU just handing the bytes over (stream wrappers,
a per-read timeout scope, generator layers), several times what the gateway spends on the event itself
(docs/benchmarks.md). Here a read is one ``data_received`` callback that de-chunks into a buffer and wakes the one
waiting reader: no per-read timer, no per-read allocation beyond the bytes.

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
import ssl
import time
import zlib
from collections import deque
from typing import Any, cast
from urllib.parse import urlsplit

try:  # the `fast` extra: its C parser de-chunks a body ~8x faster than the Python loop below (the fallback)
    import httptools as _httptools
except ImportError:  # pragma: no cover - the fast extra is in the default install
    _httptools = None  # type: ignore[assignment]

__all__ = ["ConnectError", "ConnectTimeout", "HTTPStreamError", "IdleTimeout", "LeanHTTP", "ProtocolError",
           "StreamResponse"]

_MAX_HEAD = 64 * 1024
_MAX_SIZE_LINE = 1024


class HTTPStreamError(Exception):
    """Any failure of a request or its body."""


class ConnectError(HTTPStreamError):
    """The TCP (or TLS) connection could not be made."""


class ConnectTimeout(HTTPStreamError):
    """No connection within the connect timeout."""


class IdleTimeout(HTTPStreamError):
    """No bytes for the idle timeout."""


class ProtocolError(HTTPStreamError):
    """The connection broke, or the server sent something that is not HTTP/1.1."""


_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


class _Dechunker:
    """A ``chunked`` body through httptools' parser: it is fed a head saying so, then the body bytes as they come;
    the de-chunked data lands in the connection's ``pieces``, the last chunk (and trailers) ends the body."""

    __slots__ = ("conn", "parser")

    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        assert _httptools is not None
        self.parser: Any = _httptools.HttpResponseParser(self)
        self.parser.feed_data(_CHUNKED_HEAD)

    def on_body(self, body: bytes) -> None:
        conn = self.conn
        conn.pieces.append(body)
        conn.buffered += len(body)

    def on_message_complete(self) -> None:
        self.conn.eof = True


class _Conn(asyncio.Protocol):
    """One connection. Parses the response head, then de-chunks the body into ``pieces`` for the reader."""

    def __init__(self, key: tuple[str, str, int], max_buffer: int) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.max_buffer = max_buffer
        self._buf = b""  # bytes not yet parsed (head, or a partial chunk header)
        self.pieces: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.head: asyncio.Future[tuple[int, dict[str, str]]] | None = None
        self.error: HTTPStreamError | None = None
        self.eof = False  # the body ended (its last byte parsed)
        self.closed = False  # the socket is gone
        self.reusable = False
        self.last_data = 0.0
        self.received = False  # any byte since the last request was sent
        self.idle_since = 0.0
        # body framing: -1 close-delimited; chunked: _chunk_left is what is left of the current chunk
        self._chunked = False
        self._length = -1
        self._chunk_left = 0
        self._chunk_crlf = 0  # CRLF bytes still to skip after a chunk's data
        self._in_body = False
        self._done_trailers = False
        self._dechunker: _Dechunker | None = None

    # -- asyncio callbacks ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio.Transport subclasses

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if not self.eof and self.error is None:
            if self._in_body and not self._chunked and self._length < 0:
                self.eof = True  # a close-delimited body ends with the connection
            else:
                self.error = ProtocolError(f"connection closed by the server{f' ({exc})' if exc else ''}")
        if self.head is not None and not self.head.done():
            self.head.set_exception(self.error or ProtocolError("connection closed before a response"))
        self._wake()

    def data_received(self, data: bytes) -> None:
        self.last_data = time.monotonic()
        self.received = True
        if self._in_body:
            self._body(data)
        else:
            self._buf += data
            self._parse_head()
        if self.buffered > self.max_buffer and not self.paused and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True
        self._wake()

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost decides what that meant

    # -- parsing -------------------------------------------------------------------------------------------------

    def _fail(self, message: str) -> None:
        self.error = ProtocolError(message)
        if self.head is not None and not self.head.done():
            self.head.set_exception(self.error)
        if self.transport is not None:
            self.transport.abort()

    def _parse_head(self) -> None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > _MAX_HEAD:
                self._fail(f"response head larger than {_MAX_HEAD} bytes")
            return
        head, rest = self._buf[:end].decode("latin-1"), self._buf[end + 4 :]
        self._buf = b""
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            self._fail(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
            return
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._fail(f"malformed response header line {line[:80]!r}")
                return
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            self._buf = rest
            self._parse_head()
            return
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._dechunker = _Dechunker(self) if self._chunked and _httptools is not None else None
        length = headers.get("content-length")
        self._length = int(length) if length and length.isdigit() and not self._chunked else -1
        self.reusable = parts[0] == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        self._in_body = True
        if self._length == 0 or status in (204, 304):
            self.eof = True
        if self.head is not None and not self.head.done():
            self.head.set_result((status, headers))
        if rest and not self.eof:
            self._body(rest)

    def _body(self, data: bytes) -> None:
        if self.eof:
            return
        if not self._chunked:
            if self._length >= 0:
                data = data[: self._length]
                self._length -= len(data)
                if self._length == 0:
                    self.eof = True
            if data:
                self.pieces.append(data)
                self.buffered += len(data)
            return
        if self._dechunker is not None:
            try:
                self._dechunker.parser.feed_data(data)
            except _httptools.HttpParserError as exc:  # type: ignore[union-attr]
                if not self.eof:  # (bytes after the body's end are not ours to judge)
                    self._fail(f"bad chunked body: {exc}")
            return
        if self._buf:
            data, self._buf = self._buf + data, b""
        # The fallback without httptools. Locals in the loop (one read often holds a hundred chunks); the state goes
        # back to self on every exit.
        pieces = self.pieces
        find = data.find
        pos, size = 0, len(data)
        left, crlf = self._chunk_left, self._chunk_crlf
        added = 0
        try:
            while pos < size:
                if crlf:
                    skip = min(crlf, size - pos)
                    pos += skip
                    crlf -= skip
                    continue
                if left:
                    take = min(left, size - pos)
                    pieces.append(data[pos : pos + take] if take != size else data)
                    added += take
                    pos += take
                    left -= take
                    if not left:
                        crlf = 2
                    continue
                if self._done_trailers:  # after the last chunk: trailers until an empty line
                    end = find(b"\r\n", pos)
                    if end < 0:
                        self._buf = data[pos:]
                        return
                    if end == pos:
                        self.eof = True
                        return
                    pos = end + 2
                    continue
                end = find(b"\r\n", pos)
                if end < 0:
                    self._buf = data[pos:]
                    if len(self._buf) > _MAX_SIZE_LINE:
                        self._fail("chunk size line too long")
                    return
                line = data[pos:end]
                try:
                    left = int(line, 16)  # bytes, surrounding blanks allowed; an extension (";...") fails here
                except ValueError:
                    try:
                        left = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        left = -1
                if left < 0:
                    left = 0
                    self._fail(f"bad chunk size {line[:40]!r}")
                    return
                pos = end + 2
                if left == 0:
                    self._done_trailers = True
                    continue
                stop = pos + left
                if stop + 2 <= size:  # the whole chunk and its CRLF are in this read: one step
                    pieces.append(data[pos:stop])
                    added += left
                    pos = stop + 2
                    left = 0
        finally:
            self._chunk_left, self._chunk_crlf = left, crlf
            self.buffered += added

    # -- the reader's side ---------------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def send(self, request: bytes) -> None:
        assert self.transport is not None
        self.head = asyncio.get_running_loop().create_future()
        self.pieces.clear()
        self.buffered = 0
        self.eof = self._in_body = self._done_trailers = False
        self._dechunker = None
        self._chunked, self._length, self._chunk_left, self._chunk_crlf = False, -1, 0, 0
        self._buf = b""
        self.error = None
        self.received = False
        self.last_data = time.monotonic()
        self.transport.write(request)

    def take(self) -> bytes:
        """Everything buffered, as one bytes object (usually one piece: no copy)."""
        pieces = self.pieces
        data = pieces.popleft() if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data


class StreamResponse:
    """A response whose body is read with ``await read()`` (``b""`` at its end). Always ``await aclose()``."""

    def __init__(self, client: LeanHTTP, conn: _Conn, status: int, headers: dict[str, str],
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


class LeanHTTP:
    """Keep-alive connections per (scheme, host, port), for streaming ``post`` requests."""

    def __init__(self, *, connect_timeout: float, idle_timeout: float, keepalive_expiry: float = 4.0,
                 max_idle_per_host: int = 32, max_buffer: int = 1 << 20) -> None:
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.keepalive_expiry = keepalive_expiry
        self.max_idle_per_host = max_idle_per_host
        self.max_buffer = max_buffer
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            try:
                import certifi

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                self._ssl = ssl.create_default_context()
        return self._ssl

    def _put_back(self, conn: _Conn) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if self._closed or len(idle) >= self.max_idle_per_host:
            assert conn.transport is not None
            conn.transport.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    def _pooled(self, key: tuple[str, str, int]) -> _Conn | None:
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

    async def _connect(self, key: tuple[str, str, int]) -> _Conn:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        conn = _Conn(key, self.max_buffer)
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
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ConnectError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, parts.hostname, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"{method} {target} HTTP/1.1", f"host: {host_header}"]
        if body or method not in ("GET", "HEAD"):
            lines.append(f"content-length: {len(body)}")
        lines += [f"{name}: {value}" for name, value in headers.items() if name.lower() not in ("host",
                                                                                             "content-length")]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (0, 1):
            conn = self._pooled(key)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key)
            conn.send(request)
            assert conn.head is not None
            try:
                async with asyncio.timeout(self.idle_timeout):
                    status, response_headers = await conn.head
            except TimeoutError:
                if conn.transport is not None:
                    conn.transport.abort()
                raise IdleTimeout(f"no response head for {self.idle_timeout:g} s") from None
            except ProtocolError:
                if reused and attempt == 0 and not conn.received:
                    continue  # a stale kept-alive connection: nothing received, safe to send again
                raise
            except asyncio.CancelledError:
                if conn.transport is not None:
                    conn.transport.abort()
                raise
            try:
                return StreamResponse(self, conn, status, response_headers, self.idle_timeout)
            except ProtocolError:
                if conn.transport is not None:
                    conn.transport.abort()
                raise
        raise ProtocolError("the server closed the connection before answering")  # pragma: no cover

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
