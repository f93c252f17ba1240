"""Prometheus metrics through ``prometheus-client``: histograms an SLO can be set on, counters, gauges.

One :class:`Metrics` per app, each with its own registry (tests run many apps in one process). With
``PROMETHEUS_MULTIPROC_DIR`` set (``respstream serve --workers N`` sets it), every worker writes its samples to
that folder and ``/metrics`` of any worker renders the sum over all of them (prometheus-client's multiprocess
mode); gauges then add up the live workers' values.

Everything here is called per request, per response or per batch of events, never per event, so the client
library's lock and float work stay well under the per-response budget (measured in benchmarks/observability.py).
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess as _multiprocess

from respstream.server.telemetry.metric_totals import MetricTotals

__all__ = ["CONTENT_TYPE", "Metrics", "NoMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: from a fast local model's first token (a few ms) to a slow remote one under load (a minute).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
EVENTS_BATCH = 1024  # events counted before respstream_events is updated (also at every response's end)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144)
# Label values a client or a model could otherwise invent at will: every new value is a new time series kept for
# the life of the process. h11 accepts any token as a method and records it before auth; a model may call a tool
# by any name. Outside these sets the label is "other".
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
OTHER = "other"


class Metrics:
    """The gateway's metrics. ``render()`` is the body of ``GET /metrics``."""

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir if multiprocess_dir is not None else (
            os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None)
        # In multiprocess mode samples go to files whatever the registry; a private one keeps them off the global.
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # Samples added up between scrapes in one process (telemetry/metric_totals.py); None: straight through.
        self._totals = None if self.multiprocess_dir else MetricTotals()
        self._pending_events = 0
        self.tool_names: frozenset[str] = frozenset()  # the server tools (set by the service): tool label values
        livesum: dict[str, Any] = {"multiprocess_mode": "livesum"} if self.multiprocess_dir else {}
        self.http_requests = Counter("respstream_http_requests", "HTTP requests by method, route and status.",
                                     ["method", "route", "status"], registry=reg)
        self.responses = Counter("respstream_responses", "Finished responses by final status, dialect and model.",
                                 ["status", "dialect", "model"], registry=reg)
        self.errors = Counter("respstream_errors", "Errors by code: HTTP errors before a stream and terminal "
                              "stream errors.", ["code"], registry=reg)
        self.tool_calls = Counter("respstream_tool_calls", "Server tool calls by tool and status.",
                                  ["tool", "status"], registry=reg)
        self.upstream_failures = Counter("respstream_upstream_failures", "Upstream failures by upstream and code.",
                                         ["upstream", "code"], registry=reg)
        self.events = Counter("respstream_events", "Stream events emitted.", registry=reg)
        # No field-name label: the names are the client's to invent (the log line names them).
        self.ignored_fields = Counter("respstream_ignored_request_fields", "Request fields this gateway does not "
                                      "know, accepted and ignored (strict_fields = false), by transport.",
                                      ["transport"], registry=reg)
        self.upstream_repairs = Counter("respstream_upstream_repairs", "Protocol violations repaired in native "
                                        "Responses upstream streams, by violation code.", ["code"], registry=reg)
        self.ttft = Histogram("respstream_time_to_first_token_seconds",
                              "From the request to the first generated token (text, reasoning or tool arguments).",
                              ["model"], buckets=LATENCY_BUCKETS, registry=reg)
        self.duration = Histogram("respstream_response_duration_seconds",
                                  "From the request to the response's terminal event.", ["status"],
                                  buckets=DURATION_BUCKETS, registry=reg)
        self.tokens = Histogram("respstream_response_tokens", "Tokens per response, by kind (input, output).",
                                ["kind"], buckets=TOKEN_BUCKETS, registry=reg)
        self.upstream_latency = Histogram("respstream_upstream_latency_seconds",
                                          "Upstream phases: queue (waiting for a concurrency slot), connect "
                                          "(until response headers), first_chunk (until the first chunk).",
                                          ["upstream", "phase"], buckets=LATENCY_BUCKETS, registry=reg)
        self.tool_latency = Histogram("respstream_tool_duration_seconds", "Server tool run time by tool.",
                                      ["tool"], buckets=LATENCY_BUCKETS, registry=reg)
        self.queue_wait = Histogram("respstream_queue_wait_seconds",
                                    "From the request until its generation started (background queue included).",
                                    buckets=LATENCY_BUCKETS, registry=reg)
        self.open_streams = Gauge("respstream_open_streams", "Open SSE and WebSocket streams.", registry=reg,
                                  **livesum)
        self.running_generations = Gauge("respstream_running_generations", "Responses being generated.",
                                         registry=reg, **livesum)
        self.store_up = Gauge("respstream_store_up", "1 when the last store health check succeeded, else 0.",
                              registry=reg, **livesum)
        self.upstream_up = Gauge("respstream_upstream_up", "1 when the upstream is healthy, else 0.", ["upstream"],
                                 registry=reg, **livesum)
        # The deferred-work queue is shared by every instance on the store: each reports the same numbers.
        livemax: dict[str, Any] = {"multiprocess_mode": "livemax"} if self.multiprocess_dir else {}
        self.deferred_depth = Gauge("respstream_deferred_queue_depth", "Deferred background responses "
                                    "(background_options.completion_window) in the shared queue: waiting, or taken "
                                    "by an instance.", ["state"], registry=reg, **livemax)
        self.deferred_oldest = Gauge("respstream_deferred_queue_oldest_wait_seconds", "How long the longest-waiting "
                                     "deferred response has waited (0: none waits).", registry=reg, **livemax)
        self.deferred_slack = Gauge("respstream_deferred_queue_least_slack_seconds", "Seconds until the nearest "
                                    "completion window of a waiting deferred response ends (negative: past it).",
                                    registry=reg, **livemax)
        self.deferred_runs = Counter("respstream_deferred_runs", "Deferred responses this instance took from the "
                                     "queue, by outcome (ran, took_over, expired, dropped).", ["outcome"],
                                     registry=reg)

    # -- recording -------------------------------------------------------------------------------------------------
    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: prometheus-client validates the labels and takes a lock on
        every ``labels()`` call, and a response makes a dozen of them. The label values are bounded sets (routes,
        statuses, models, error codes), and prometheus-client keeps every child it made anyway."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels) if labels else metric
        return child

    def _inc(self, metric: Any, *labels: str, amount: float = 1) -> None:
        if self._totals is not None:
            self._totals.inc(metric, labels, amount)
        else:
            self._child(metric, *labels).inc(amount)

    def _observe(self, metric: Any, value: float, *labels: str) -> None:
        if self._totals is not None:
            self._totals.observe(metric, labels, value)
        else:
            self._child(metric, *labels).observe(value)

    def _set(self, gauge: Any, value: float) -> None:
        if self._totals is not None:
            self._totals.set(gauge, value)
        else:
            gauge.set(value)

    def request(self, method: str, route: str, status: int) -> None:
        self._inc(self.http_requests, method if method in HTTP_METHODS else OTHER, route, str(status))
        if status >= 400:
            self._inc(self.errors, f"http_{status}")

    def ignored(self, transport: str, n: int) -> None:
        """``n`` unknown request fields were ignored on ``transport`` (http or websocket)."""
        self._inc(self.ignored_fields, transport, amount=n)

    def count_events(self, n: int) -> None:
        """Called per flush of a response's events (dozens per response): the counter's lock is taken once per
        ``EVENTS_BATCH`` events, at each response's end and before each scrape instead."""
        self._pending_events += n
        if self._pending_events >= EVENTS_BATCH:
            self._publish_events()

    def _publish_events(self) -> None:
        pending, self._pending_events = self._pending_events, 0
        if pending:
            self._inc(self.events, amount=pending)

    def tool_label(self, name: str) -> str:
        """``name`` when it is a server tool, else "other" (a model-invented name must not make a time series)."""
        return name if name in self.tool_names else OTHER

    def tool(self, name: str, status: str, seconds: float | None = None) -> None:
        label = self.tool_label(name)
        self._inc(self.tool_calls, label, status)
        if seconds is not None:
            self.tool_seconds(name, seconds)

    def tool_seconds(self, name: str, seconds: float) -> None:
        self._observe(self.tool_latency, seconds, self.tool_label(name))

    def finished(self, *, status: str, dialect: str, model: str, seconds: float, error_code: str | None,
                 input_tokens: int | None, output_tokens: int | None) -> None:
        self._publish_events()
        self._inc(self.responses, status, dialect, model)
        self._observe(self.duration, seconds, status)
        if error_code:
            self._inc(self.errors, error_code)
        if input_tokens is not None:
            self._observe(self.tokens, input_tokens, "input")
        if output_tokens is not None:
            self._observe(self.tokens, output_tokens, "output")

    def queue_waited(self, seconds: float) -> None:
        self._observe(self.queue_wait, seconds)

    def repairs(self, counts: dict[str, int]) -> None:
        """What the gateway repaired in one response's native Responses upstream stream (violation code -> n)."""
        for code, n in counts.items():
            self._inc(self.upstream_repairs, code, amount=n)

    def first_token(self, model: str, seconds: float) -> None:
        self._observe(self.ttft, seconds, model)

    def upstream_phase(self, upstream: str, phase: str, seconds: float) -> None:
        self._observe(self.upstream_latency, seconds, upstream, phase)

    def upstream_failure(self, upstream: str, code: str) -> None:
        self._inc(self.upstream_failures, upstream, code)

    def set_open_streams(self, n: int) -> None:
        self._set(self.open_streams, n)

    def set_running(self, n: int) -> None:
        self._set(self.running_generations, n)

    def set_deferred(self, *, waiting: int, taken: int, oldest_wait: float, least_slack: float | None) -> None:
        self._child(self.deferred_depth, "waiting").set(waiting)
        self._child(self.deferred_depth, "taken").set(taken)
        self.deferred_oldest.set(oldest_wait)
        self.deferred_slack.set(least_slack if least_slack is not None else 0.0)

    def deferred_run(self, outcome: str) -> None:
        self._inc(self.deferred_runs, outcome)

    def set_health(self, *, store_ok: bool | None = None, upstreams: dict[str, bool] | None = None) -> None:
        if store_ok is not None:
            self.store_up.set(1 if store_ok else 0)
        for name, ok in (upstreams or {}).items():
            self._child(self.upstream_up, name).set(1 if ok else 0)

    # -- exposition ------------------------------------------------------------------------------------------------
    def render(self) -> bytes:
        self._publish_events()
        if self._totals is not None:
            self._totals.publish()
        if self.multiprocess_dir:
            merged = CollectorRegistry()
            _multiprocess.MultiProcessCollector(merged, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
            return generate_latest(merged)
        return generate_latest(self.registry)


class NoMetrics(Metrics):
    """``[telemetry] metrics = false``: the same interface, nothing recorded, an empty ``/metrics``."""

    def __init__(self) -> None:
        super().__init__(multiprocess_dir="")
        self.multiprocess_dir = None

    def request(self, method: str, route: str, status: int) -> None:
        pass

    def count_events(self, n: int) -> None:
        pass

    def ignored(self, transport: str, n: int) -> None:
        pass

    def tool(self, name: str, status: str, seconds: float | None = None) -> None:
        pass

    def tool_seconds(self, name: str, seconds: float) -> None:
        pass

    def finished(self, **_: Any) -> None:  # type: ignore[override]
        pass

    def repairs(self, counts: dict[str, int]) -> None:
        pass

    def first_token(self, model: str, seconds: float) -> None:
        pass

    def queue_waited(self, seconds: float) -> None:
        pass

    def upstream_phase(self, upstream: str, phase: str, seconds: float) -> None:
        pass

    def upstream_failure(self, upstream: str, code: str) -> None:
        pass

    def set_open_streams(self, n: int) -> None:
        pass

    def set_running(self, n: int) -> None:
        pass

    def set_deferred(self, *, waiting: int, taken: int, oldest_wait: float, least_slack: float | None) -> None:
        pass

    def deferred_run(self, outcome: str) -> None:
        pass

    def set_health(self, *, store_ok: bool | None = None, upstreams: dict[str, bool] | None = None) -> None:
        pass

    def render(self) -> bytes:
        return b""
