"""Item 5 of issue 13: the memory store is bounded in bytes, and ``store: false`` responses are not kept.

At c1c983b 2,000 requests of 1 MiB with ``store: false`` took the gateway's RSS from 87 MB to 2.1 GB. Here: 120 such
requests (the same per-request size, fewer of them to stay under 10 s) against a REAL ``respstream serve``
subprocess, and the same with ``store: true`` under a 32 MiB ``memory_store_max_bytes``; the gateway's RSS must not
grow by anything near what was sent. The model is the SIMULATED ``scripted`` upstream."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import httpx
import pytest

from .gateway import Gateway

MIB = 1 << 20
COUNT = 120


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _flood(url: str, count: int, *, store: bool) -> list[str]:
    body = {"model": "scripted", "input": "x" * (MIB - 200), "store": store, "stream": False}

    def one(_: int) -> str:
        with httpx.Client(timeout=30) as client:
            r = client.post(f"{url}/v1/responses", json=body)
            assert r.status_code == 200, r.text[:300]
            return str(r.json()["id"])

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize("store", [False, True], ids=["store-false", "store-true-over-budget"])
def test_memory_is_bounded_in_bytes(tmp_path: Path, store: bool) -> None:
    with Gateway(tmp_path, memory_store_max_bytes=32 * MIB, max_body_bytes=2 * MIB) as gw:
        assert gw.process is not None
        _flood(gw.url, 10, store=store)  # warm up allocator pools and caches
        before = _rss_kib(gw.process.pid)
        ids = _flood(gw.url, COUNT, store=store)
        grown_mib = (_rss_kib(gw.process.pid) - before) / 1024
        first, last = (httpx.get(f"{gw.url}/v1/responses/{rid}", timeout=10) for rid in (ids[0], ids[-1]))
    assert grown_mib < 48, f"RSS grew {grown_mib:.0f} MiB after {COUNT} MiB of requests"
    assert first.status_code == 404  # store:false never kept; store:true: evicted by the byte budget
    assert last.status_code == (200 if store else 404)
