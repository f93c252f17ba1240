"""Issue 41: the samples a response makes are added up in plain Python (telemetry/metric_totals.py) and handed to
prometheus-client before each render. What ``/metrics`` shows must be exactly what observing each sample straight
through shows: same buckets (a value on a bound included), same sums and counts, same counters and gauges."""

from __future__ import annotations

import math
import random

import pytest

from respstream.server.telemetry.metrics import LATENCY_BUCKETS, Metrics, NoMetrics


def _samples(text: bytes) -> dict[str, float]:
    """Every sample line but the ``_created`` timestamps (each metric's own creation time)."""
    out: dict[str, float] = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            if "_created" not in name:
                out[name] = float(value)
    return out


def _same(got: bytes, expected: bytes) -> None:
    mine, theirs = _samples(got), _samples(expected)
    assert mine.keys() == theirs.keys()
    for name, value in theirs.items():
        # Sums add the same samples in a different grouping (a batch's total, then the running sum): equal to
        # the last bits of a float; every count, bucket and gauge exactly.
        if "_sum" in name:
            assert math.isclose(mine[name], value, rel_tol=1e-12), name
        else:
            assert mine[name] == value, name


def _straight(metrics: Metrics) -> Metrics:
    metrics._totals = None  # every sample straight to prometheus-client, as in multiprocess mode
    return metrics


def _drive(metrics: Metrics, seed: int) -> None:
    rng = random.Random(seed)
    for n in range(300):
        status = rng.choice(["completed", "failed", "incomplete"])
        seconds = rng.choice([rng.random() * 3, *LATENCY_BUCKETS, 0.0, 700.0])  # on the bounds, past the last one
        metrics.request("POST", "/v1/responses", rng.choice([200, 400, 503]))
        metrics.count_events(rng.randrange(0, 40))
        metrics.finished(status=status, dialect="openai", model="m", seconds=seconds,
                         error_code="boom" if status == "failed" else None, input_tokens=rng.randrange(0, 5000),
                         output_tokens=None if n % 7 == 0 else rng.randrange(0, 300))
        metrics.queue_waited(seconds / 10)
        metrics.first_token("m", seconds)
        metrics.upstream_phase("u", rng.choice(["queue", "connect", "first_chunk"]), seconds)
        metrics.tool("web_search", "completed", seconds)
        metrics.set_open_streams(n % 5)
        metrics.set_running(n % 3)
        metrics.repairs({"sequence.gap": 1})
        metrics.upstream_failure("u", "timeout")
        metrics.deferred_run("ran")
        metrics.ignored("http", 2)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rendered_totals_equal_straight_observation(seed: int) -> None:
    print("seed", seed)
    totals, straight = Metrics(multiprocess_dir=""), _straight(Metrics(multiprocess_dir=""))
    _drive(totals, seed)
    _drive(straight, seed)
    assert totals._totals is not None
    assert b"respstream_response_duration_seconds_bucket" in totals.render()
    _same(totals.render(), straight.render())  # a second render adds nothing twice
    _drive(totals, seed + 10)
    _drive(straight, seed + 10)
    _same(totals.render(), straight.render())


def test_samples_wait_for_the_render_and_nan_goes_straight_through() -> None:
    metrics = Metrics(multiprocess_dir="")
    metrics.finished(status="completed", dialect="openai", model="m", seconds=0.3, error_code=None,
                     input_tokens=3, output_tokens=4)
    child = metrics.duration.labels("completed")
    assert child._sum.get() == 0.0  # added up, not yet handed over
    metrics.first_token("m", math.nan)
    assert math.isnan(metrics.ttft.labels("m")._sum.get())
    text = metrics.render().decode()
    assert 'respstream_response_duration_seconds_bucket{le="0.5",status="completed"} 1.0' in text
    assert 'respstream_response_duration_seconds_bucket{le="0.25",status="completed"} 0.0' in text
    assert 'respstream_response_duration_seconds_sum{status="completed"} 0.3' in text


def test_a_negative_counter_increment_is_still_refused() -> None:
    metrics = Metrics(multiprocess_dir="")
    with pytest.raises(ValueError):
        metrics.ignored("http", -1)


def test_no_metrics_renders_nothing() -> None:
    metrics = NoMetrics()
    _drive(metrics, 0)
    assert metrics.render() == b""
