"""Issue 42 H4v remainder: what requests in flight hold (decoded JSON, parsed request, the upstream's messages) is
charged to a gateway-wide and per-key budget, reserved before the body is decoded.

Before: the stores were bounded at their real size, but 32 WebSockets of ``store: false`` turns of 30,000 tiny input
items still grew the gateway to 555 MB: a request being parsed and run was charged to nothing, bounded only by
``max_body_bytes`` x ``max_concurrent_streams``. Now ``limits.requests_inflight_bytes`` (503) and
``limits.requests_inflight_bytes_per_key`` (429) bound it, with ``Retry-After`` and a message naming the limit.

The gateway (SIMULATED scripted upstream, slow enough that the requests overlap), HTTP and WebSocket are real, on
loopback. Memory is Python's own allocation peak (tracemalloc) in this process, where the gateway runs.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import msgspec
import pytest
from websockets.sync.client import connect

from respstream.cli import main
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.request_limits import WorkLimits
from respstream.server.store.object_size import deep_size

from .helpers import ServerThread
from .test_websocket import TERMINALS

pytestmark = pytest.mark.timeout(180)

MIB = 1 << 20
ITEMS = 12_000  # tiny input items a request (~620 KB of JSON, ~4 MB decoded)
REQUESTS = 8  # at once


def _limits(**wanted: int) -> dict[str, int]:
    """The limits this code knows (so the same test measures the code before the budget existed)."""
    return {k: v for k, v in wanted.items() if k in WorkLimits.__dataclass_fields__}


def _body(n: int) -> dict[str, Any]:
    return {"stream": False, "store": False,
            "input": [{"type": "message", "role": "user", "content": f"{n}"}] * ITEMS}


def _measure(run: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = run()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_concurrent_http_requests_share_one_budget_of_request_memory() -> None:
    total = 24 * MIB  # about two such requests at once
    config = Config(upstreams=["scripted:6?delay_ms=300"], dialect="openai",
                    limits=_limits(requests_inflight_bytes=total))
    with ServerThread(create_app(config)) as gw:
        with httpx.Client(timeout=60) as warm:
            assert warm.post(f"{gw.url}/v1/responses", json={"input": "warm up"}).status_code == 200

        def send() -> list[httpx.Response]:
            with ThreadPoolExecutor(REQUESTS) as pool, httpx.Client(timeout=120) as client:
                return list(pool.map(lambda n: client.post(f"{gw.url}/v1/responses", json=_body(n)),
                                     range(REQUESTS)))

        answers, peak = _measure(send)
    done = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code != 200]
    print(f"peak +{peak / MIB:.1f} MiB; {len(done)} answered, {len(refused)} refused")
    assert done, [a.text[:200] for a in refused]
    for answer in refused:
        error = answer.json()["error"]
        assert answer.status_code == 503 and error["code"] == "request_memory_budget_exceeded", answer.text[:300]
        assert "limits.requests_inflight_bytes" in error["message"] and answer.headers["retry-after"]
    # Before: all 8 decoded, parsed and prompted at once: +100 MiB or more.
    assert peak < total + 32 * MIB, peak / MIB


def test_websocket_turns_of_one_key_share_its_budget(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys.json"
    assert main(["keys", "--file", str(keys), "create", "--name", "ws", "--json"]) == 0
    key = str(json.loads(capsys.readouterr().out)["key"])
    per_key = 24 * MIB
    config = Config(upstreams=["scripted:6?delay_ms=300"], dialect="openai", keys_file=str(keys),
                    limits=_limits(requests_inflight_bytes_per_key=per_key))
    with ServerThread(create_app(config), ws="websockets-sansio") as gw:
        url = f"ws://127.0.0.1:{gw.port}/v1/responses"

        def turn(n: int) -> dict[str, Any]:
            with connect(url, additional_headers={"Authorization": f"Bearer {key}"}, max_size=None,
                         open_timeout=30) as ws:
                ws.send(json.dumps({"type": "response.create", **_body(n), "stream": True}))
                while True:
                    event = json.loads(ws.recv(timeout=60))
                    if event["type"] in TERMINALS or event["type"] == "error":
                        return event

        def send() -> list[dict[str, Any]]:
            with ThreadPoolExecutor(REQUESTS) as pool:
                return list(pool.map(turn, range(REQUESTS)))

        events, peak = _measure(send)
    done = [e for e in events if e["type"] == "response.completed"]
    refused = [e for e in events if e["type"] == "error"]
    print(f"peak +{peak / MIB:.1f} MiB; {len(done)} completed, {len(refused)} refused")
    assert done and len(done) + len(refused) == REQUESTS, events
    for event in refused:
        assert event["status"] == 429 and event["error"]["code"] == "request_memory_budget_exceeded", event
        assert "limits.requests_inflight_bytes_per_key" in event["error"]["message"]
    assert refused  # 8 turns of ~9 MiB each do not fit a 24 MiB share at once
    assert peak < per_key + 40 * MIB, peak / MIB


@pytest.mark.parametrize("shape", [
    [{"type": "message", "role": "user", "content": "x"}] * 3000, [{}] * 30000, [[]] * 30000, [0] * 30000,
    [10 ** 18] * 30000, [1.5] * 30000, ["a"] * 30000, ["\u00e9"] * 30000, "a" * 90000 + "\U0001F600",
    {f"k{i}": i for i in range(6000)}, [{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}] * 3000,
    [{"a": {"b": [{}]}}] * 6000, [True, None] * 15000,
])
def test_the_bound_before_decoding_covers_what_decoding_makes(shape: Any) -> None:
    from respstream.server.inputs.request_memory import decoded_bound

    for raw in (json.dumps({"input": shape}).encode(), json.dumps({"input": shape}, ensure_ascii=False,
                                                                   separators=(",", ":")).encode()):
        assert deep_size(msgspec.json.decode(raw)) <= decoded_bound(raw) <= 100 * len(raw) + 4096  # never absurd


def test_the_budget_is_per_key_settled_and_released() -> None:
    from respstream.server.http_errors import HTTPError
    from respstream.server.inputs.request_memory import RequestMemory

    memory = RequestMemory(total=100 * MIB, per_key=50 * MIB)
    first = memory.reserve("key-a", 40 * MIB)
    with pytest.raises(HTTPError) as info:
        memory.reserve("key-a", 20 * MIB)
    assert info.value.status == 429 and "limits.requests_inflight_bytes_per_key" in info.value.message
    assert info.value.headers and info.value.headers["Retry-After"]
    second = memory.reserve("key-b", 45 * MIB)
    with pytest.raises(HTTPError) as info:
        memory.reserve(None, 20 * MIB)  # keyless: the gateway's total only
    assert info.value.status == 503 and "limits.requests_inflight_bytes" in info.value.message
    first.settle(10 * MIB)  # decoded: what it really holds
    assert memory.bytes.held("key-a") == 10 * MIB
    with pytest.raises(HTTPError):
        second.settle(60 * MIB)  # grown past the key's share: refused, everything given back
    assert memory.bytes.held("key-b") == 0
    third = memory.reserve(None, 20 * MIB)
    for hold in (first, second, third, first):
        hold.release()
    assert memory.bytes.used == 0


def test_websocket_creates_waiting_on_a_lane_keep_their_reservation() -> None:
    """Creates queued behind a running turn are decoded objects: they stay charged until they start (then their
    turn's own reservation takes over), and everything is given back when the turns end."""
    config = Config(upstreams=["scripted:6?delay_ms=200"], dialect="openai")
    app = create_app(config)
    with ServerThread(app, ws="websockets-sansio") as gw:
        memory = app.state.gateway.request_memory.bytes
        with connect(f"ws://127.0.0.1:{gw.port}/v1/responses", max_size=None) as ws:
            small = {"type": "response.create", "stream": True, "store": False, "input": "hi"}
            ws.send(json.dumps(small))  # runs about a second
            ws.send(json.dumps({**small, "input": [{"role": "user", "content": "x"}] * 5000}))  # waits on the lane
            ws.send(json.dumps({**small, "input": [{"role": "user", "content": "y"}] * 5000}))
            seen, ended = 0, 0
            while ended < 3:
                event = json.loads(ws.recv(timeout=60))
                seen = max(seen, memory.used)
                ended += event["type"] in TERMINALS or event["type"] == "error"
                assert event["type"] != "error", event
        held_while_running = seen
        deadline = time.monotonic() + 5
        while memory.used and time.monotonic() < deadline:  # the last turn's task ends just after its terminal
            time.sleep(0.1)
    # Two waiting creates of 5,000 items: each reserved at least its decoded size while it waited. Without that,
    # one lane runs one turn at a time and at most that turn was charged (twice its decoded size).
    assert held_while_running > 3 * deep_size(msgspec.json.decode(json.dumps(
        [{"role": "user", "content": "x"}] * 5000))), held_while_running
    assert memory.used == 0
