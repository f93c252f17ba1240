"""Issue 42 H3v: ``file_url`` fetches of all requests together are bounded, reserved before anything is fetched.

Before: the caps were per request. 96 concurrent requests, each with 16 ``file_url`` parts of 1 MB (each within
every cap), grew the gateway by 2.1 GB, and the requests that were refused were refused only after fetching. Now
a request reserves what its fetches may hold in a gateway-wide and a per-key budget first (inputs/fetch_budget.py)
and is refused (503 / 429 naming the limit) without fetching when it does not fit.

The file host is a SIMULATED ASGI app on loopback; the gateway (SIMULATED scripted upstream, slow enough that the
requests overlap), its fetcher, the network policy and the sockets are real. Memory is Python's own allocation
peak (tracemalloc) in this process, where the gateway runs; no times are asserted.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.http_errors import HTTPError
from respstream.server.request_limits import WorkLimits

from .helpers import ServerThread

pytestmark = pytest.mark.timeout(180)

MIB = 1 << 20
PARTS = 8  # file_url parts per request, 1 MiB each
REQUESTS = 16  # at once


class _FileHost:
    """SIMULATED file host: any GET -> 1 MiB of bytes; counts requests."""

    def __init__(self) -> None:
        self.hits = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.hits += 1
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream"),
                                (b"content-length", str(MIB).encode())]})
        await send({"type": "http.response.body", "body": b"x" * MIB})


@pytest.fixture(scope="module")
def files() -> Iterator[tuple[_FileHost, str]]:
    host = _FileHost()
    with ServerThread(host, lifespan="off") as srv:
        yield host, srv.url


def _limits(**wanted: int) -> dict[str, int]:
    """The limits this code knows (so the same test measures the code before the budget existed)."""
    return {k: v for k, v in wanted.items() if k in WorkLimits.__dataclass_fields__}


def _body(url: str, n: int) -> dict[str, Any]:
    parts = [{"type": "input_file", "file_url": f"{url}/{n}-{i}.bin"} for i in range(PARTS)]
    return {"stream": False, "input": [{"role": "user", "content": [{"type": "input_text", "text": "Sum up."},
                                                                      *parts]}]}


def test_concurrent_file_url_requests_share_one_budget(files: tuple[_FileHost, str]) -> None:
    host, file_url = files
    total = 64 * MIB  # about three requests' files (each reserves ~22 MiB, holds ~21 MiB once fetched)
    config = Config(upstreams=["scripted:6?delay_ms=300"], dialect="openai",
                    tools={"fetch_allow": ["127.0.0.1"], "fetch_max_bytes": MIB},
                    limits=_limits(file_urls_inflight_bytes=total))
    host.hits = 0
    with ServerThread(create_app(config)) as gw:
        with httpx.Client(timeout=60) as warm:  # the app's first-request work outside the measurement
            assert warm.get(f"{gw.url}/healthz").status_code == 200
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            with ThreadPoolExecutor(REQUESTS) as pool, httpx.Client(timeout=120) as client:
                answers = list(pool.map(lambda n: client.post(f"{gw.url}/v1/responses", json=_body(file_url, n)),
                                        range(REQUESTS)))
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    done = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code != 200]
    print(f"peak +{peak / MIB:.1f} MiB; {len(done)} answered, {len(refused)} refused; {host.hits} fetches")
    # Before: every request held its 8 MiB of files as base64 at once: +170 MiB or more.
    assert peak < total + 24 * MIB, peak / MIB
    assert done, [a.text[:200] for a in refused]
    for answer in refused:
        error = answer.json()["error"]
        assert answer.status_code == 503 and error["code"] == "file_fetch_budget_exceeded", answer.text[:300]
        assert "limits.file_urls_inflight_bytes" in error["message"] and answer.headers["retry-after"]
    assert host.hits == PARTS * len(done)  # a refused request fetched nothing


def test_the_budget_is_per_key_and_reserved_before_fetching() -> None:
    from respstream.server.inputs.fetch_budget import FetchBudget, held_bytes, worst_case_bytes

    budget = FetchBudget(total=100 * MIB, per_key=50 * MIB)
    need = worst_case_bytes(16, 2 * MIB, 16 * MIB)
    assert 2 * (16 * MIB * 4 // 3) < need < 2 * (16 * MIB * 4 // 3) + 3 * MIB
    first = budget.reserve("key-a", need)
    with pytest.raises(HTTPError) as info:
        budget.reserve("key-a", need)  # the key's share is taken: 429, whatever the gateway has left
    assert info.value.status == 429 and "limits.file_urls_inflight_bytes_per_key" in info.value.message
    second = budget.reserve("key-b", need)
    with pytest.raises(HTTPError) as info:
        budget.reserve(None, 30 * MIB)  # keyless: the gateway's total only, and it is taken
    assert info.value.status == 503 and "limits.file_urls_inflight_bytes" in info.value.message
    first.settle(held_bytes(["x" * (4 * MIB)]))  # fetched: the real size of what it holds, not the worst case
    assert budget.bytes.held("key-a") == first.bytes > 8 * MIB
    third = budget.reserve(None, 30 * MIB)
    for hold in (first, second, third, first):  # released when each response ends; twice is harmless
        hold.release()
    assert budget.bytes.used == 0


def test_a_refused_request_costs_no_fetch(files: tuple[_FileHost, str]) -> None:
    from respstream.server.inputs.fetch_budget import FetchBudget, held_bytes
    from respstream.server.inputs.input_files import resolve_file_urls
    from respstream.server.tools.netguard import AddressPolicy

    class Tools:
        policy = AddressPolicy(["127.0.0.1"])

        class config:
            fetch_max_bytes = MIB

    host, url = files
    host.hits = 0
    budget = FetchBudget(total=8 * MIB, per_key=8 * MIB)
    media = [(f"input[0].content[{i}]", {"type": "file", "file": {"file_url": f"{url}/{i}.bin"}}) for i in range(8)]
    with pytest.raises(HTTPError) as info:
        asyncio.run(resolve_file_urls(media, Tools(), budget=budget, owner="k"))
    assert info.value.code == "file_fetch_budget_exceeded" and host.hits == 0 and budget.bytes.used == 0
    hold = asyncio.run(resolve_file_urls(media[:2], Tools(), budget=budget, owner="k"))
    assert hold is not None and host.hits == 2 and budget.bytes.used == hold.bytes
    assert hold.bytes == held_bytes(p["file"]["file_data"] for _, p in media[:2])
    hold.release()
