"""input_file file_url fetching is bounded per request: parts, total bytes, one deadline (issue #30 H3, L2).

The file host is a SIMULATED ASGI app on loopback; the fetcher, the network policy and the sockets are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from respstream.server import request_limits
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.input_files import resolve_file_urls
from respstream.server.request_limits import WorkLimits
from respstream.server.tools.netguard import AddressPolicy

from .helpers import ServerThread

MIB = 1 << 20


class _Tools:
    """The two attributes resolve_file_urls reads from the server tools: loopback allowed, 2 MiB per fetch."""

    policy = AddressPolicy(["127.0.0.1"])

    class config:
        fetch_max_bytes = 2 * MIB


class _FileHost:
    """SIMULATED file host: GET /<n>.bin -> n MiB of bytes, after ``delay`` seconds; counts requests."""

    def __init__(self) -> None:
        self.hits = 0
        self.delay = 0.0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.hits += 1
        await asyncio.sleep(self.delay)
        size = int(scope["path"].strip("/").split(".")[0]) * MIB
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream"),
                                (b"content-length", str(size).encode())]})
        await send({"type": "http.response.body", "body": b"x" * size})


@pytest.fixture(scope="module")
def host() -> Iterator[tuple[_FileHost, str]]:
    app = _FileHost()
    with ServerThread(app, lifespan="off") as srv:
        yield app, srv.url


@pytest.fixture(autouse=True)
def limits(host: tuple[_FileHost, str]) -> Iterator[None]:
    host[0].hits, host[0].delay = 0, 0.0
    yield
    request_limits.install(WorkLimits())


def _media(url: str, count: int, size: int = 1) -> list[tuple[str, dict[str, Any]]]:
    return [(f"input[0].content[{i}]", {"type": "file", "file": {"file_url": f"{url}/{size}.bin"}})
            for i in range(count)]


def test_too_many_file_urls_are_refused_before_any_fetch(host: tuple[_FileHost, str]) -> None:
    app, url = host
    with pytest.raises(HTTPError) as info:
        asyncio.run(resolve_file_urls(_media(url, 600), _Tools()))
    assert info.value.status == 400 and info.value.code == "too_many_file_urls"
    assert "limits.file_urls_per_request" in info.value.message and info.value.param == "input[0].content[16].file_url"
    assert app.hits == 0


def test_the_fetched_bytes_of_one_request_stay_within_the_total(host: tuple[_FileHost, str]) -> None:
    app, url = host
    request_limits.install(WorkLimits(file_urls_max_total_bytes=3 * MIB))
    media = _media(url, 5, size=1) + _media(url, 1, size=2)
    with pytest.raises(HTTPError) as info:
        asyncio.run(resolve_file_urls(media, _Tools()))
    assert "limits.file_urls_max_total_bytes" in info.value.message
    assert info.value.param == "input[0].content[3].file_url"
    fetched = [p for _, p in media if "file_data" in p["file"]]
    assert len(fetched) == 3 and app.hits == 4
    ok = _media(url, 3)
    asyncio.run(resolve_file_urls(ok, _Tools()))
    assert all(p["file"]["file_data"].startswith("data:application/octet-stream;base64,") for _, p in ok)


def test_all_fetches_share_one_deadline(host: tuple[_FileHost, str]) -> None:
    app, url = host
    app.delay = 0.4
    request_limits.install(WorkLimits(file_urls_fetch_seconds=1.0))
    with pytest.raises(HTTPError) as info:
        asyncio.run(resolve_file_urls(_media(url, 8), _Tools()))  # 8 x 0.4 s, each within its own timeout
    assert info.value.code == "file_fetch_timeout" and "limits.file_urls_fetch_seconds" in info.value.message
    assert app.hits < 8
