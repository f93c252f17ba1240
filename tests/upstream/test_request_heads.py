"""Issue 41: the lean HTTP client builds a request head once per (method, URL, headers) and reuses it; the bytes on
the wire are what building it every time gave (content-length per body, headers in order, Host and a caller's own
content-length left out), a traced request's varying head gets its own, and the remembered heads stay bounded."""

from __future__ import annotations

import asyncio

import pytest

from respstream.server.upstream.http import stream as http_stream
from respstream.server.upstream.http.stream import LeanHTTP


def _wire(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    """What the client sends, captured from a loopback server that answers 204."""
    sent: list[bytes] = []

    async def run() -> None:
        async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            sent.append(head + await reader.readexactly(length))
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = LeanHTTP(connect_timeout=5, idle_timeout=5)
        try:
            response = await client.post(url.replace("PORT", str(port)), body, headers)
            await response.aclose()
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()

    asyncio.run(run())
    return sent[0]


def test_the_head_on_the_wire() -> None:
    headers = {"accept": "text/event-stream", "Host": "evil", "Content-Length": "9", "authorization": "Bearer k"}
    got = _wire("http://127.0.0.1:PORT/v1/chat/completions?x=1", b'{"a": 1}', headers)
    port = got.split(b"host: 127.0.0.1:")[1].split(b"\r\n")[0].decode()
    assert got == (f"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-length: 8\r\n"
                   "accept: text/event-stream\r\nauthorization: Bearer k\r\n\r\n").encode() + b'{"a": 1}'


def test_a_head_is_built_once_per_method_url_and_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = http_stream._target

    def counting(url: str) -> tuple[tuple[str, str, int], str, str]:
        built.append(url)
        return real(url)

    monkeypatch.setattr(http_stream, "_target", counting)
    client = LeanHTTP(connect_timeout=5, idle_timeout=5)
    url = "http://127.0.0.1:9/v1/chat/completions"
    plain = {"accept": "text/event-stream"}
    first = client._head("POST", url, plain)
    assert client._head("POST", url, dict(plain)) is first  # an equal dict: the same head
    assert len(built) == 1
    traced = client._head("POST", url, {**plain, "traceparent": "00-1-2-01"})
    assert traced is not first and traced[2].endswith(b"traceparent: 00-1-2-01\r\n\r\n")
    assert client._head("POST", url, {"text/event-stream": "accept"}) is not first  # names and values apart
    assert client._head("GET", url, plain) is not first
    for n in range(http_stream._HEADS_KEPT + 5):  # every request traced differently: the memory stays bounded
        client._head("POST", url, {**plain, "traceparent": f"00-{n}-2-01"})
    assert len(client._heads) <= http_stream._HEADS_KEPT
