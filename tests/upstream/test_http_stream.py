"""The lean HTTP/1.1 client (server/upstream/http/stream.py) against a raw loopback socket server that writes exact
bytes: chunked bodies split at every awkward place, Content-Length and close-delimited bodies, gzip, a stale
kept-alive connection (retried once), connection reuse, idle timeout, refused connections, a broken status line."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from respstream.server.upstream.http.stream import (
    ConnectError,
    IdleTimeout,
    LeanHTTP,
    ProtocolError,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], "asyncio.Future[None] | object"]


@asynccontextmanager
async def raw_server(handler: Callable[..., object]) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback TCP server; ``handler(reader, writer, n)`` serves connection number n. Yields (url, requests)."""
    seen: list[int] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n = len(seen)
        seen.append(n)
        try:
            await handler(reader, writer, n)  # type: ignore[misc]
        finally:
            writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions", seen
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


async def body_of(client: LeanHTTP, url: str) -> tuple[int, bytes]:
    response = await client.post(url, b'{"x":1}', {"content-type": "application/json"})
    out = b""
    while part := await response.read():
        out += part
    await response.aclose()
    return response.status_code, out


@pytest.mark.parametrize("cut", [1, 3, 5, 7, 11, 64])
async def test_chunked_body_split_anywhere_comes_out_whole(cut: int) -> None:
    events = [b"data: {\"n\":%d}\n\n" % i for i in range(20)]
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/event-stream\r\n\r\n"
    wire = head + chunked(*events)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        request = await read_request(reader)
        assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and request.endswith(b'{"x":1}')
        for i in range(0, len(wire), cut):  # every split: inside sizes, CRLFs, data
            writer.write(wire[i : i + cut])
            await writer.drain()
            await asyncio.sleep(0)

    async with raw_server(handler) as (url, _):
        client = LeanHTTP(connect_timeout=2, idle_timeout=5)
        assert await body_of(client, url) == (200, b"".join(events))
        await client.aclose()


async def test_keep_alive_reuses_the_connection_and_content_length_bodies() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        for i in range(3):
            await read_request(reader)
            body = b"answer %d" % i
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    async with raw_server(handler) as (url, seen):
        client = LeanHTTP(connect_timeout=2, idle_timeout=5)
        assert [await body_of(client, url) for _ in range(3)] == [(200, b"answer %d" % i) for i in range(3)]
        assert seen == [0]  # one connection for all three
        await client.aclose()


async def test_a_stale_kept_alive_connection_is_retried_once_on_a_fresh_one() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        # and then the server closes its end (as after its own keep-alive timeout)

    async with raw_server(handler) as (url, seen):
        client = LeanHTTP(connect_timeout=2, idle_timeout=5)
        assert await body_of(client, url) == (200, b"ok")
        await asyncio.sleep(0.05)
        assert await body_of(client, url) == (200, b"ok")
        assert len(seen) == 2
        await client.aclose()


async def test_gzip_and_close_delimited_bodies_are_decoded() -> None:
    plain = b"data: hello\n\n" * 50

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\nconnection: close\r\n\r\n" + gzip.compress(plain))
        await writer.drain()

    async with raw_server(handler) as (url, _):
        client = LeanHTTP(connect_timeout=2, idle_timeout=5)
        assert await body_of(client, url) == (200, plain)
        await client.aclose()


async def test_a_stall_is_an_idle_timeout_and_a_drop_mid_body_a_protocol_error() -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + b"5\r\nhello\r\n")
        await writer.drain()
        await asyncio.sleep(2)

    async with raw_server(stall) as (url, _):
        client = LeanHTTP(connect_timeout=2, idle_timeout=0.3)
        response = await client.post(url, b"{}", {})
        assert await response.read() == b"hello"
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(IdleTimeout, match=r"no data for 0\.3 s"):
            await response.read()
        assert loop.time() - started < 10  # the IdleTimeout itself proves the timer fired (the server's 2 s
        # sleep would have ended in data, not an error); the bound only catches a hang on a busy machine
        await response.aclose()
        await client.aclose()

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + b"5\r\nhel")
        await writer.drain()

    async with raw_server(drop) as (url, _):
        client = LeanHTTP(connect_timeout=2, idle_timeout=5)
        response = await client.post(url, b"{}", {})
        with pytest.raises(ProtocolError, match="connection closed by the server"):
            while await response.read():
                pass
        await response.aclose()
        await client.aclose()


async def test_no_response_head_is_an_idle_timeout_and_the_connection_is_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The head wait has its own timer (not a timeout scope): it fires once, says what was late, and the socket is
    aborted (the server sees the connection go); a head that comes in time cancels it."""
    from respstream.server.upstream.http import stream as http_stream

    fired: list[float] = []
    overdue = http_stream._head_overdue

    def counted(head: asyncio.Future[Any], seconds: float) -> None:
        fired.append(seconds)
        overdue(head, seconds)

    monkeypatch.setattr(http_stream, "_head_overdue", counted)
    gone = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        if n == 0:
            await reader.read()  # nothing ever answered: returns when the client drops the connection
            gone.set()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(1)

    async with raw_server(silent) as (url, _):
        client = LeanHTTP(connect_timeout=2, idle_timeout=0.3)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(IdleTimeout, match=r"no response head for 0\.3 s"):
            await client.post(url, b"{}", {})
        assert 0.25 <= loop.time() - started < 10 and fired == [0.3]  # not early; fired == [0.3] says which timer
        await asyncio.wait_for(gone.wait(), 2)
        response = await client.post(url, b"{}", {})  # a new connection; its head in time: no timer left behind
        assert response.status_code == 200 and await response.read() == b"ok"
        await asyncio.sleep(0.4)  # past the idle timeout: a timer not cancelled would have fired by now
        assert fired == [0.3]
        await response.aclose()
        await client.aclose()


async def test_refused_connection_and_a_non_http_answer_are_clear_errors() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()

    async with raw_server(garbage) as (url, _):
        client = LeanHTTP(connect_timeout=2, idle_timeout=5)
        with pytest.raises(ProtocolError, match=r"not an HTTP/1\.x status line: 'SSH-2\.0-OpenSSH'"):
            await client.post(url, b"{}", {})
        await client.aclose()
    client = LeanHTTP(connect_timeout=2, idle_timeout=5)
    with pytest.raises(ConnectError):
        await client.post(url, b"{}", {})  # the server is gone: nothing listens on that port now
    await client.aclose()


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "127.0.0.1:9/v1", "http:///v1", "http://127.0.0.1:abc/v1",
                                 "http://127.0.0.1:99999/v1", "http://127.0.0.1:0/v1"])
async def test_a_url_that_is_not_http_is_a_connect_error_saying_so(url: str) -> None:
    client = LeanHTTP(connect_timeout=2, idle_timeout=5)
    for _ in range(2):  # (parsed URLs are cached: the second call must fail the same way)
        with pytest.raises(ConnectError, match="not an http\\(s\\) URL"):
            await client.post(url, b"{}", {})
    await client.aclose()
