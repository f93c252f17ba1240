"""The client against the real gateway (respstream.server, SIMULATED scripted upstream) on loopback.

Connections are cut on the client side (an httpx transport wrapper that breaks the body after K bytes), so the
gateway's own background log and ``GET …?starting_after=N`` are what the resume goes through.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from client_helpers import SSL_CONTEXT, fast_policy

from respstream.client import AsyncClient, Client
from respstream.errors import StreamTruncated
from respstream.server.config import Config
from respstream.server.http.app import create_app


class _Server:
    """uvicorn in a thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "gateway did not start"
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module", params=["platform", "openai"])
def gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    app = create_app(Config(dialect=request.param, upstreams=["scripted:24?delay_ms=3"]))
    with _Server(app) as base_url:
        yield base_url


class _Cut:
    """Shared plan: the first ``len(cuts)`` streaming bodies break after ``cuts[i]`` bytes."""

    def __init__(self, cuts: list[int]) -> None:
        self.cuts = list(cuts)
        self.streams: list[str] = []  # method of every streaming request, in order

    def take(self, request: httpx.Request) -> int | None:
        if "text/event-stream" not in request.headers.get("accept", ""):
            return None
        self.streams.append(request.method)
        return self.cuts.pop(0) if self.cuts else None


class _CutStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, limit: int) -> None:
        self.inner, self.limit = inner, limit

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self.inner:
            room = self.limit - sent
            if len(chunk) >= room:
                if room:
                    yield chunk[:room]
                raise httpx.ReadError("connection cut by the test")
            sent += len(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _AsyncCutStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in self.inner:
            room = self.limit - sent
            if len(chunk) >= room:
                if room:
                    yield chunk[:room]
                raise httpx.ReadError("connection cut by the test")
            sent += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CuttingTransport(httpx.HTTPTransport):
    def __init__(self, cut: _Cut) -> None:
        super().__init__(verify=SSL_CONTEXT)
        self.cut = cut

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        limit = self.cut.take(request)
        if limit is None or response.status_code != 200:
            return response
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_CutStream(response.stream, limit), extensions=response.extensions)


class AsyncCuttingTransport(httpx.AsyncHTTPTransport):
    def __init__(self, cut: _Cut) -> None:
        super().__init__(verify=SSL_CONTEXT)
        self.cut = cut

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        limit = self.cut.take(request)
        if limit is None or response.status_code != 200:
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_AsyncCutStream(response.stream, limit), extensions=response.extensions)


def _sync(base_url: str, cuts: list[int], **request: Any) -> tuple[list[int | None], Any, Any, int]:
    cut = _Cut(cuts)
    http = httpx.Client(transport=CuttingTransport(cut))
    with http, Client(base_url, retry=fast_policy(), http_client=http) as client:
        stream = client.stream(input="Tell me a story", **request)
        with stream:
            seqs = [e.sequence_number for e in stream]
            result = stream.result()
        stored = client.retrieve(result.response_id) if request.get("background") else None
        assert cut.streams == ["POST"] + ["GET"] * stream.resumes  # resumed by GET, never re-POSTed
        return seqs, result, stored, stream.resumes


def _async(base_url: str, cuts: list[int], **request: Any) -> tuple[list[int | None], Any, Any, int]:
    async def main() -> tuple[list[int | None], Any, Any, int]:
        cut = _Cut(cuts)
        http = httpx.AsyncClient(transport=AsyncCuttingTransport(cut))
        async with http, AsyncClient(base_url, retry=fast_policy(), http_client=http) as client:
            async with client.stream(input="Tell me a story", **request) as stream:
                seqs = [e.sequence_number async for e in stream]
                result = await stream.result()
            stored = await client.retrieve(result.response_id) if request.get("background") else None
            assert cut.streams == ["POST"] + ["GET"] * stream.resumes  # resumed by GET, never re-POSTed
            return seqs, result, stored, stream.resumes

    return asyncio.run(main())


RUN = {"sync": _sync, "async": _async}


@pytest.mark.parametrize("mode", ["sync", "async"])
# The first cut lies after response.created (the gateway sends no x-response-id header, so before it the id is
# unknown); later cuts may fall anywhere, even after 1 byte of a resumed body.
@pytest.mark.parametrize("cuts", [[1300], [1400, 50], [1500, 1, 900], [1300, 200, 200, 200]],
                         ids=["once", "twice", "three-times", "four-times"])
def test_background_stream_resumes_through_the_gateway(gateway: str, mode: str, cuts: list[int]) -> None:
    seqs, result, stored, resumes = RUN[mode](gateway, cuts, background=True)
    assert seqs == list(range(len(seqs)))  # no duplicate, no gap across every seam
    assert result.status == "completed"
    assert result.violations == []
    assert resumes >= 1
    assert result.output_text == stored["output_text"] or result.output_text == "".join(
        part.get("text", "") for item in stored["output"] if item.get("type") == "message"
        for part in item.get("content", []))
    assert result.streamed_text == result.output_text  # every delta arrived exactly once


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_foreground_cut_through_the_gateway_is_truncated_not_reposted(gateway: str, mode: str) -> None:
    with pytest.raises(StreamTruncated) as info:
        RUN[mode](gateway, [900])
    assert info.value.last_sequence_number is not None
    assert info.value.partial is not None and info.value.partial.status == "truncated"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_uncut_stream_through_the_gateway(gateway: str, mode: str) -> None:
    seqs, result, _, resumes = RUN[mode](gateway, [])
    assert resumes == 0
    assert seqs == list(range(len(seqs)))
    assert result.status == "completed" and result.violations == []
    assert result.usage and result.usage["output_tokens"] == 24
