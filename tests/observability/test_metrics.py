"""``/metrics`` through prometheus-client, read back with its own parser: histograms count what was served.

The gateway runs for real on loopback, in front of the in-process SIMULATED scripted upstream or the SIMULATED
Chat Completions server (tests/fakes/chat_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text, tool, usage
from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.http.auth import KeyStore

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(body: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of every sample named ``name`` whose labels include ``labels``."""
    return sum(v for (n, got), v in samples.items() if n == name and set(labels.items()) <= set(got))


def test_histograms_count_every_response_served() -> None:
    with FakeChatCompletionsServer() as fake:
        fake.script(text("Hello"), text(" there"), usage(12, 2), finish("stop"), Done())
        config = Config(upstreams=[fake.url], upstream_options={"retries": 0})
        with ServerThread(create_app(config)) as gw, httpx.Client(base_url=gw.base_url, timeout=30) as c:
            served = 0
            streamed_events = []
            for i in range(4):  # two streamed, two as JSON
                if i % 2:
                    with c.stream("POST", "/responses", json={"input": f"hi {i}", "stream": True}) as r:
                        body = r.read()
                        assert b"response.completed" in body
                        streamed_events.append(sum(1 for line in body.split(b"\n")
                                                   if line.startswith(b"data: ") and line != b"data: [DONE]"))
                else:
                    assert c.post("/responses", json={"input": f"hi {i}", "stream": False}).json()["status"] == \
                        "completed"
                served += 1
            assert c.post("/responses", json={"input": 5}).status_code == 400  # a bad request: no response
            samples = _samples(c.get(f"{gw.url}/metrics").text)
    assert _value(samples, "respstream_time_to_first_token_seconds_count") == served
    assert _value(samples, "respstream_response_duration_seconds_count", status="completed") == served
    assert _value(samples, "respstream_responses_total", status="completed", dialect="platform") == served
    assert _value(samples, "respstream_response_tokens_count", kind="input") == served
    assert _value(samples, "respstream_response_tokens_sum", kind="output") == 2 * served
    assert _value(samples, "respstream_queue_wait_seconds_count") == served
    for phase in ("queue", "connect", "first_chunk"):
        assert _value(samples, "respstream_upstream_latency_seconds_count", phase=phase) == served
    assert _value(samples, "respstream_http_requests_total", route="/v1/responses", status="200") == served
    assert _value(samples, "respstream_http_requests_total", route="/v1/responses", status="400") == 1
    assert _value(samples, "respstream_errors_total", code="http_400") == 1
    assert _value(samples, "respstream_open_streams") == 0
    assert _value(samples, "respstream_running_generations") == 0
    # Every response (streamed or not) emitted the same events; the counter is exact at a scrape.
    assert streamed_events[0] == streamed_events[1] > 5
    assert _value(samples, "respstream_events_total") == streamed_events[0] * served
    # The TTFT histogram's buckets are cumulative and end at +Inf with the count.
    inf = _value(samples, "respstream_time_to_first_token_seconds_bucket", le="+Inf")
    assert inf == served


def test_tool_latency_and_failures_by_code() -> None:
    with FakeChatCompletionsServer() as fake:
        fake.script(tool(0, id="c1", name="calculator", args='{"expression": "2 ** 10"}'), finish("tool_calls"),
                    Done())
        fake.script(text("1024"), finish("stop"), Done())
        config = Config(upstreams=[fake.url], upstream_options={"retries": 0})
        with ServerThread(create_app(config)) as gw, httpx.Client(base_url=gw.base_url, timeout=30) as c:
            assert c.post("/responses", json={"input": "go", "stream": False}).json()["status"] == "completed"
            samples = _samples(c.get(f"{gw.url}/metrics").text)
    assert _value(samples, "respstream_tool_calls_total", tool="calculator", status="completed") == 1
    assert _value(samples, "respstream_tool_duration_seconds_count", tool="calculator") == 1


def test_a_failed_response_counts_its_error_code() -> None:
    config = Config(upstreams=["scripted:5?fail_at=2"])
    with ServerThread(create_app(config)) as gw, httpx.Client(base_url=gw.base_url, timeout=30) as c:
        c.post("/responses", json={"input": "go", "stream": False})
        samples = _samples(c.get(f"{gw.url}/metrics").text)
    assert _value(samples, "respstream_errors_total", code="upstream_error") == 1
    assert _value(samples, "respstream_upstream_failures_total", code="upstream_error") == 1
    assert _value(samples, "respstream_response_duration_seconds_count", status="failed") == 1


def test_metrics_need_a_key_when_keys_are_configured(tmp_path: Path) -> None:
    keys = KeyStore(str(tmp_path / "keys.json"))
    key, _ = keys.create("ops")
    config = Config(upstreams=["scripted:3"], keys_file=str(tmp_path / "keys.json"))
    with ServerThread(create_app(config)) as gw:
        assert httpx.get(f"{gw.url}/metrics").status_code == 401
        assert httpx.get(f"{gw.url}/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = httpx.get(f"{gw.url}/metrics", headers={"authorization": f"Bearer {key}"})
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain; version=0.0.4")
    open_config = Config(upstreams=["scripted:3"], keys_file=str(tmp_path / "keys.json"),
                         telemetry={"metrics_key_required": False})
    with ServerThread(create_app(open_config)) as gw:
        assert httpx.get(f"{gw.url}/metrics").status_code == 200


def test_metrics_can_be_turned_off() -> None:
    with ServerThread(create_app(Config(upstreams=["scripted:3"], telemetry={"metrics": False}))) as gw:
        httpx.post(f"{gw.base_url}/responses", json={"input": "go", "stream": False}, timeout=30)
        assert httpx.get(f"{gw.url}/metrics").text == ""


def test_multiprocess_mode_sums_the_workers(tmp_path: Path) -> None:
    """What ``--workers`` relies on: two processes writing to one PROMETHEUS_MULTIPROC_DIR; either renders both."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from respstream.server.telemetry.metrics import Metrics\n"
        "m = Metrics()\n"
        "m.first_token('m1', 0.02)\n"
        "m.finished(status='completed', dialect='openai', model='m1', seconds=0.5, error_code=None,"
        " input_tokens=3, output_tokens=4)\n"
        "sys.stdout.write(m.render().decode())\n"
    )
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    outputs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                              timeout=60).stdout for _ in range(2)]
    last = _samples(outputs[-1])
    assert _value(last, "respstream_time_to_first_token_seconds_count") == 2
    assert _value(last, "respstream_responses_total", status="completed") == 2
    assert len(list(tmp_path.glob("*.db"))) >= 2  # one file per process and kind


@pytest.mark.parametrize("bad", [{"traces": "maybe"}, {"colour": 1}, {"max_content_chars": -1}])
def test_bad_telemetry_table_is_a_config_error(bad: dict[str, object], tmp_path: Path) -> None:
    from respstream.server.config import ConfigError, load_config

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"telemetry": bad}))
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert "telemetry" in str(info.value)


def test_events_counted_in_batches_are_all_in_every_scrape() -> None:
    from respstream.server.telemetry.metrics import EVENTS_BATCH, Metrics

    metrics = Metrics(multiprocess_dir="")
    for _ in range(EVENTS_BATCH + 5):  # one flush of one event at a time, no response ended yet
        metrics.count_events(1)
    assert metrics._totals is not None  # one process: samples are added up until a render (issue 41)
    assert metrics._totals._counters[(id(metrics.events), ())][1] == EVENTS_BATCH  # published when the batch filled
    assert _value(_samples(metrics.render().decode()), "respstream_events_total") == EVENTS_BATCH + 5
    metrics.count_events(3)
    metrics.finished(status="completed", dialect="openai", model="m", seconds=0.1, error_code=None,
                     input_tokens=None, output_tokens=None)
    assert _value(_samples(metrics.render().decode()), "respstream_events_total") == EVENTS_BATCH + 8
    straight = Metrics(multiprocess_dir="")
    straight._totals = None  # multiprocess mode: straight through, the batch as before
    for _ in range(EVENTS_BATCH + 5):
        straight.count_events(1)
    assert straight.events._value.get() == EVENTS_BATCH
    straight.finished(status="completed", dialect="openai", model="m", seconds=0.1, error_code=None,
                      input_tokens=None, output_tokens=None)
    assert straight.events._value.get() == EVENTS_BATCH + 5
