"""Deferred background work through one gateway (in process, memory store, the SIMULATED `scripted:` upstream):
``background_options`` validation, retrieve and cancel while queued, interactive requests first, urgency."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import create_app


def _gateway(upstream: str = "scripted:40?delay_ms=25", **settings: Any) -> ServerThread:
    config = Config(dialect="openai", upstreams=[upstream], rewrite={"steps": []}, deferred_poll_seconds=0.05,
                    **settings)
    return ServerThread(create_app(config))


@pytest.fixture(scope="module")
def parked() -> Iterator[str]:
    """A gateway that never runs deferred work itself (deferred_concurrency = 0): what is queued stays queued."""
    with _gateway(deferred_concurrency=0) as gateway:
        yield gateway.base_url


def _deferred(window: str = "2h", **extra: Any) -> dict[str, Any]:
    return {"input": "batch me", "background": True, "background_options": {"completion_window": window}, **extra}


@pytest.mark.parametrize(("body", "param"), [
    (_deferred("1h"), "background_options.completion_window"),
    (_deferred(7), "background_options.completion_window"),
    ({"input": "x", "background_options": {"completion_window": "2h"}}, "background_options"),
    (_deferred("8h", stream=True), "stream"),
    ({**_deferred(), "background_options": {"completion_window": "2h", "continuation_id": "c1"}},
     "background_options.continuation_id"),
    ({**_deferred(), "background_options": "2h"}, "background_options"),
])
def test_bad_background_options_are_refused_naming_the_field(parked: str, body: dict[str, Any], param: str) -> None:
    response = httpx.post(f"{parked}/responses", json=body, timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_queued_work_is_retrievable_and_cancellable_while_queued(parked: str) -> None:
    with httpx.Client(timeout=10) as client:
        created = client.post(f"{parked}/responses", json=_deferred("2h"))
        assert created.status_code == 200, created.text
        body = created.json()
        rid = body["id"]
        assert body["status"] == "queued" and body["background"] is True
        assert body["background_options"] == {"completion_window": "2h"}
        assert client.get(f"{parked}/responses/{rid}").json()["status"] == "queued"
        waiting = 'respstream_deferred_queue_depth{state="waiting"} 1.0'
        assert waiting in _metrics_showing(client, parked.removesuffix("/v1"), waiting)
        cancelled = client.post(f"{parked}/responses/{rid}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert client.get(f"{parked}/responses/{rid}").json()["status"] == "cancelled"
        log = client.get(f"{parked}/responses/{rid}", params={"stream": "true"}).content
        again = client.post(f"{parked}/responses/{rid}/cancel")  # idempotent
    core = StreamCore(dialect="openai")
    core.feed(log)
    core.close()
    assert core.violations == [] and core.result.status == "cancelled"
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


def _metrics_showing(client: httpx.Client, root: str, *lines: str, within: float = 5.0) -> str:
    """The metrics page once it shows every one of ``lines``, or as it is after ``within`` seconds: the deferred
    queue's gauges are sampled by the scheduler's step (every deferred_poll_seconds), not at each change."""
    deadline = time.monotonic() + within
    while True:
        text = client.get(f"{root}/metrics").text
        if all(line in text for line in lines) or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def _status(client: httpx.Client, url: str, rid: str) -> str:
    return str(client.get(f"{url}/responses/{rid}").json()["status"])


def test_interactive_first_then_deferred_runs_and_completes() -> None:
    with _gateway("scripted:60?delay_ms=40") as gateway, httpx.Client(timeout=30) as client:
        url = gateway.base_url
        interactive_done = threading.Event()

        def interactive() -> None:
            httpx.post(f"{url}/responses", json={"input": "talk to me", "stream": True}, timeout=30)
            interactive_done.set()

        talker = threading.Thread(target=interactive)
        talker.start()
        time.sleep(0.3)  # the interactive stream is generating (2.4 s)
        rid = client.post(f"{url}/responses", json=_deferred("soonest")).json()["id"]
        seen = set()
        while not interactive_done.is_set():
            seen.add(_status(client, url, rid))
            time.sleep(0.05)
        talker.join()
        assert seen == {"queued"}  # it waited while the interactive response ran
        deadline = time.monotonic() + 20
        while _status(client, url, rid) != "completed" and time.monotonic() < deadline:
            time.sleep(0.05)
        final = client.get(f"{url}/responses/{rid}").json()
        log = client.get(f"{url}/responses/{rid}", params={"stream": "true"}).content
        ran = 'respstream_deferred_runs_total{outcome="ran"} 1.0'
        emptied = 'respstream_deferred_queue_depth{state="waiting"} 0.0'
        metrics = _metrics_showing(client, gateway.url, ran, emptied)
    assert final["status"] == "completed" and len(final["output_text"].split()) == 60
    core = StreamCore(dialect="openai")
    core.feed(log)
    core.close()
    assert core.violations == [] and core.result.output_text == final["output_text"]
    assert ran in metrics and emptied in metrics


def test_work_due_within_the_urgent_margin_runs_despite_interactive_load() -> None:
    # Every window is "urgent" here (margin > 8 h): it must not wait for the interactive stream to end.
    with _gateway("scripted:80?delay_ms=40", deferred_urgent_seconds=9 * 3600.0) as gateway, \
            httpx.Client(timeout=30) as client:
        url = gateway.base_url
        talker = threading.Thread(target=lambda: httpx.post(f"{url}/responses", timeout=30,
                                                            json={"input": "talk", "stream": True}))
        talker.start()
        time.sleep(0.3)
        rid = client.post(f"{url}/responses", json=_deferred("8h")).json()["id"]
        deadline = time.monotonic() + 2.0  # well before the 3.2 s interactive stream ends
        while _status(client, url, rid) == "queued" and time.monotonic() < deadline:
            time.sleep(0.05)
        running = _status(client, url, rid)
        talker.join()
    assert running in ("in_progress", "completed")


def test_stream_true_with_soonest_streams_the_run_once_it_starts() -> None:
    with _gateway() as gateway:
        response = httpx.post(f"{gateway.base_url}/responses", json=_deferred("soonest", stream=True), timeout=30)
    core = StreamCore(dialect="openai")
    core.feed(response.content)
    core.close()
    assert response.status_code == 200 and core.violations == []
    assert core.result.status == "completed" and len(core.result.output_text.split()) == 40
