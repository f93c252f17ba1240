"""One HTTP/1.1 connection to an upstream as an asyncio protocol: it parses the response head, de-chunks (or
measures) the body into one buffer, wakes the one waiting reader, and pauses the socket past ``max_buffer``. A
reader waiting in ``StreamResponse.read_direct`` has its hook called here with each read instead, and is woken only
when the hook leaves something for it. The client around it (pool, requests, timeouts) is
:mod:`~respstream.server.upstream.http.stream`.

Errors are :class:`HTTPStreamError` subclasses, each saying what happened. Limits: a response head of at most 64 KiB,
a chunk-size line of at most 1 KiB.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

try:  # the `fast` extra: its C parser de-chunks a body ~8x faster than the Python loop below (the fallback)
    import httptools as _httptools
except ImportError:  # pragma: no cover - the fast extra is in the default install
    _httptools = None  # type: ignore[assignment]

__all__ = ["ConnectError", "ConnectTimeout", "Dechunker", "HTTPStreamError", "IdleTimeout", "ProtocolError",
           "UpstreamConnection"]

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


class Dechunker:
    """A ``chunked`` body through httptools' parser: it is fed a head saying so, then the body bytes as they come;
    the de-chunked data lands in the connection's ``pieces``, the last chunk (and trailers) ends the body.

    ``on_body`` is the deque's own ``append`` (httptools looks its callbacks up once, when the parser is made): a
    C call per chunk instead of a Python frame. The connection counts what it buffers from the raw reads instead."""

    __slots__ = ("conn", "on_body", "parser")

    def __init__(self, conn: UpstreamConnection) -> None:
        self.conn = conn
        self.on_body = conn.pieces.append
        assert _httptools is not None
        self.parser: Any = _httptools.HttpResponseParser(self)
        self.parser.feed_data(_CHUNKED_HEAD)

    def on_message_complete(self) -> None:
        self.conn.eof = True


class UpstreamConnection(asyncio.Protocol):
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
        # While the reader waits in ``StreamResponse.read_direct``: its hook, called here with each read's body
        # bytes; ``handed`` says the hook kept bytes for the reader to see (see data_received)
        self.direct: Callable[[bytes], bool] | None = None
        self.handed = False
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
        self._dechunker: Dechunker | None = None

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
        direct = self.direct
        if direct is not None and not self.eof and self.error is None:
            # The reader's task is parked in read_direct (its waiter still pending): the hook deals with the bytes
            # here, and the task is not woken at all when it took them in full (a real model's usual read), or when
            # the read held only chunk framing.
            waiter = self.waiter
            if waiter is not None and not waiter.done():
                if not self.pieces or direct(self.take()):
                    return
                self.handed = True
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
        self._dechunker = Dechunker(self) if self._chunked and _httptools is not None else None
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
            self.buffered += len(data)  # the chunk framing too: a bound a few bytes a chunk early
            try:
                self._dechunker.parser.feed_data(data)
            except _httptools.HttpParserError as exc:  # type: ignore[union-attr]
                if not self.eof:  # (bytes after the body's end are not ours to judge)
                    self._fail(f"bad chunked body: {exc}")
            if not self.pieces:  # only framing came: nothing is waiting for the reader
                self.buffered = 0
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
        self.direct = None
        self.handed = False
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
