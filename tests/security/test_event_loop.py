"""Items 1, 2, 10, 12 of issue 13: hostile request, model and fetched data cannot stall the event loop.

Each attack runs at its measured size against a REAL ``respstream serve`` subprocess over loopback while a watcher
polls ``/healthz``; no answer may wait 1 s of the event loop's own CPU (at c1c983b they took 22-494 s; CPU, not wall
time, so that a busy machine cannot fail it: HealthWatch.worst_busy). The model is the SIMULATED
``scripted:`` upstream; fetched pages come from a real loopback page server (tests/security/pages.py).
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from fakes.server_thread import ServerThread

from .gateway import Gateway, HealthWatch
from .pages import page_app

HEALTH_LIMIT = 1.0


def _post(url: str, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{url}/v1/responses", json=body, timeout=timeout)


def _attack(gateway: Gateway, bodies: list[dict[str, Any]]) -> tuple[HealthWatch, list[httpx.Response]]:
    assert gateway.process is not None
    with HealthWatch(gateway.url, pid=gateway.process.pid) as watch, \
            concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        responses = list(pool.map(lambda b: _post(gateway.url, b), bodies))
    return watch, responses


def _assert_responsive(watch: HealthWatch) -> None:
    """The event loop never held /healthz for HEALTH_LIMIT seconds of its own CPU (load-independent: see
    HealthWatch.worst_busy); the wall-clock wait is only bounded by the watcher's timeout (a failure above)."""
    assert watch.failures == [], watch.failures
    assert watch.count >= 1
    assert watch.worst_busy < HEALTH_LIMIT, (
        f"/healthz waited {watch.worst_busy:.2f} s on the event loop's CPU during the attack "
        f"(slowest answer {watch.worst:.2f} s)")


@pytest.fixture(scope="module")
def pages() -> Iterator[str]:
    with ServerThread(page_app, lifespan="off") as server:
        yield server.url


def test_url_redos_input_does_not_stall(tmp_path: Path) -> None:
    """Item 1: ``"www.-" * 209700`` (1 MiB) froze /healthz for 494 s through the router's URL regex."""
    with Gateway(tmp_path) as gw:
        watch, (response,) = _attack(gw, [{"model": "auto", "input": "www.-" * 209_700, "stream": False}])
    _assert_responsive(watch)
    assert response.status_code == 200, response.text[:300]


def test_quadratic_trailing_whitespace_from_the_model(tmp_path: Path) -> None:
    """Item 10: the default ``whitespace`` rewrite on "a" + 150,000 spaces + "x" from the model (39 s at c1c983b)."""
    text = "a" + " " * 150_000 + "x"
    with Gateway(tmp_path, upstreams=[f"scripted:1?text={quote(text)}"]) as gw:
        watch, (response,) = _attack(gw, [{"model": "auto", "input": "hi", "stream": False}])
    _assert_responsive(watch)
    assert response.status_code == 200, response.text[:300]
    message = [o for o in response.json()["output"] if o["type"] == "message"][-1]
    assert message["content"][0]["text"] == text  # nothing to trim: inner spaces are not trailing


def test_forced_call_answered_with_a_fence_of_spaces_does_not_stall(tmp_path: Path) -> None:
    """Issue 42 H2v: a forced ``tool_choice`` answered by a code fence of 3,000 spaces held /healthz 13.9-21.5 s
    (the fence regex was cubic); 24,000 spaces now, and the response fails saying the tool was not called."""
    text = "```" + " " * 24_000 + "x"
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    with Gateway(tmp_path, upstreams=[f"scripted:1?text={quote(text)}"]) as gw:
        body = {"model": "auto", "input": "hi", "stream": False, "tools": [tool],
                "tool_choice": {"type": "function", "name": "lookup"}}
        watch, (response,) = _attack(gw, [body])
    _assert_responsive(watch)
    assert response.status_code == 200, response.text[:300]
    assert response.json()["status"] == "failed", response.text[:300]
    assert response.json()["error"]["code"] == "tool_choice_not_followed", response.json()["error"]


def test_unclosed_tags_page_does_not_stall_and_times_out_honestly(tmp_path: Path, pages: str) -> None:
    """Item 2: a 90 KB page of ``"<a " * 30000`` froze the gateway 42 s and the fetch still said completed."""
    tools = {"fetch_allow": ["127.0.0.1/32"]}
    with Gateway(tmp_path, tools=tools) as gw:
        body = {"model": "auto", "input": f"Summarise {pages}/unclosed please", "stream": False}
        watch, responses = _attack(gw, [body] * 3)
    _assert_responsive(watch)
    assert all(r.status_code == 200 for r in responses), [r.text[:200] for r in responses]
    output = responses[0].json()["output"]
    assert "web_fetch" in json.dumps(output), output


def test_gzip_bombs_are_bounded_before_inflating(tmp_path: Path, pages: str) -> None:
    """Item 12: 10 concurrent gzip bombs took 377 MB and stalled 1.5 s: now at most fetch_max_bytes each is made."""
    tools = {"fetch_allow": ["127.0.0.1/32"], "fetch_max_bytes": 1 << 20}
    with Gateway(tmp_path, tools=tools) as gw:
        assert gw.process is not None
        status = Path(f"/proc/{gw.process.pid}/status")
        before = _kib(status, "VmRSS")
        body = {"model": "auto", "input": f"Summarise {pages}/bomb please", "stream": False}
        watch, responses = _attack(gw, [body] * 10)
        peak = _kib(status, "VmHWM")
    _assert_responsive(watch)
    assert all(r.status_code == 200 for r in responses), [r.text[:200] for r in responses]
    assert (peak - before) < 120 * 1024, f"RSS grew {(peak - before) // 1024} MiB for 10 bombs of 256 MiB"
    text = json.dumps(responses[0].json()["output"])
    assert "[truncated]" in text  # the page was cut at the budget, and the model was told


def _kib(status: Path, key: str) -> int:
    for line in status.read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{key} not in {status}")
