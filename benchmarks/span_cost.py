"""What one traced response's spans cost to record and to encode: ours against the OpenTelemetry SDK's, same process.

Usage (from the repository root)::

    .venv/bin/python benchmarks/span_cost.py [--responses 20000]

A response here is the gateway's span tree of one plain ``POST /v1/responses`` (request, route, store create, the
response, one upstream attempt, store finish: six spans, with the attributes the gateway sets). Peers, in the same
process and the same run:

- recording: the SDK's own tracer (``TracerProvider.get_tracer(...).start_as_current_span``) against the gateway's
  :class:`~respstream.server.telemetry.tracing.Tracing`, both with the same sampler and a ``BatchSpanProcessor`` whose
  exporter drops every batch (so the processor's work counts, the export's does not);
- encoding: the SDK's ``encode_spans(...).SerializeToString()`` against ``otlp_wire.encode_export_request`` on the
  same ended spans (512 a batch, as the processor sends them under load).

Also shown: recording when the sampler says no (``trace_sample_ratio = 0``), ours against the SDK's.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

# A queue that never fills within a run (a full one drops spans, which is cheaper than keeping them).
os.environ.setdefault("OTEL_BSP_MAX_QUEUE_SIZE", str(1 << 22))

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind

from respstream.server.telemetry.otlp_wire import encode_export_request
from respstream.server.telemetry.settings import TelemetrySettings
from respstream.server.telemetry.tracing import Tracing, trace_headers

REQUEST = {"http.request.method": "POST", "url.path": "/v1/responses",
           "respstream.request_id": "9f1c2d3e4b5a69788796a5b4c3d2e1f0", "client.address": "127.0.0.1"}
RESPONSE = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "auto", "gen_ai.provider.name": "respstream",
            "gen_ai.response.id": "resp_9f1c2d3e4b5a69788796a5b4c3d2e1f0", "respstream.background": False,
            "respstream.dialect": "openai"}
ATTEMPT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "qwen2.5-coder-1.5b",
           "gen_ai.provider.name": "openai", "respstream.upstream": "embedded"}
END = {"gen_ai.response.model": "qwen2.5-coder-1.5b", "gen_ai.usage.input_tokens": 31,
       "gen_ai.usage.output_tokens": 200, "gen_ai.response.finish_reasons": ("completed",),
       "respstream.route.category": "chat"}


class _Drop(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _ours(ratio: float) -> tuple[Callable[[], None], Tracing]:
    tracing = Tracing(TelemetrySettings(traces="true", otlp_endpoint="http://127.0.0.1:9", trace_sample_ratio=ratio))
    assert tracing._recorder is not None
    tracing._recorder.processor.shutdown()  # the real exporter's thread is not wanted here
    tracing._recorder.processor = BatchSpanProcessor(_Drop())

    def response() -> None:
        with tracing.span("POST /v1/responses", REQUEST, kind="server", parent_headers=None) as request:
            with tracing.span("route", {"gen_ai.request.model": "auto"}) as route:
                route.set_attributes({"respstream.route.category": "chat", "respstream.route.source": "rules"})
            with tracing.span("store create", {"gen_ai.response.id": RESPONSE["gen_ai.response.id"]}):
                pass
            with tracing.span("chat auto", RESPONSE) as span:
                with tracing.span("chat qwen2.5-coder-1.5b", ATTEMPT, kind="client") as attempt:
                    trace_headers()
                    attempt.set_attribute("respstream.upstream.connect_ms", 0.412)
                with tracing.span("store finish", {"respstream.events": 208}):
                    pass
                span.set_attributes(END)
            request.set_attributes({"http.route": "/v1/responses", "http.response.status_code": 200})

    return response, tracing


def _sdk(ratio: float) -> tuple[Callable[[], None], TracerProvider]:
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(BatchSpanProcessor(_Drop()))
    tracer = provider.get_tracer("respstream", "bench")

    def response() -> None:
        with tracer.start_as_current_span("POST /v1/responses", kind=SpanKind.SERVER, attributes=REQUEST) as request:
            with tracer.start_as_current_span("route", attributes={"gen_ai.request.model": "auto"}) as route:
                route.set_attributes({"respstream.route.category": "chat", "respstream.route.source": "rules"})
            with tracer.start_as_current_span("store create",
                                              attributes={"gen_ai.response.id": RESPONSE["gen_ai.response.id"]}):
                pass
            with tracer.start_as_current_span("chat auto", attributes=RESPONSE) as span:
                with tracer.start_as_current_span("chat qwen2.5-coder-1.5b", kind=SpanKind.CLIENT,
                                                  attributes=ATTEMPT) as attempt:
                    attempt.set_attribute("respstream.upstream.connect_ms", 0.412)
                with tracer.start_as_current_span("store finish", attributes={"respstream.events": 208}):
                    pass
                span.set_attributes(END)
            request.set_attributes({"http.route": "/v1/responses", "http.response.status_code": 200})

    return response, provider


def _per_call(fn: Callable[[], object], n: int) -> float:
    """Median of five runs of n calls: CPU seconds per call."""
    for _ in range(max(1, n // 20)):
        fn()
    runs = []
    for _ in range(5):
        began = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - began) / n)
    return sorted(runs)[2]


def _ended(record: Callable[[], None], processor: Any, count: int) -> list[Any]:
    """``count`` ended spans of ``record``, kept instead of processed."""
    kept: list[Any] = []
    original = processor.on_end
    processor.on_end = kept.append
    try:
        while len(kept) < count:
            record()
    finally:
        processor.on_end = original
    return kept[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", type=int, default=20000)
    args = parser.parse_args()
    n = args.responses
    rows = []
    for ratio in (1.0, 0.0):
        ours, tracing = _ours(ratio)
        sdk, provider = _sdk(ratio)
        rows.append((f"record 6 spans, sampled={ratio == 1.0}", _per_call(ours, n), _per_call(sdk, n)))
        if ratio == 1.0:
            recorder = tracing._recorder
            assert recorder is not None
            lean = _ended(ours, recorder.processor, 512)
            readable = [span.readable() for span in lean]  # the SDK's own span type, for its own encoder
            batches = n // 50 or 1
            rows.append(("encode a batch of 512, per span",
                         _per_call(functools.partial(encode_export_request, lean), batches) / 512,
                         _per_call(lambda spans=readable: encode_spans(spans).SerializeToString(), batches) / 512))
        tracing.shutdown()
        provider.shutdown()
    print(f"{'':36} {'ours µs':>9} {'SDK µs':>9} {'SDK / ours':>11}")
    for label, mine, theirs in rows:
        print(f"{label:36} {mine * 1e6:9.2f} {theirs * 1e6:9.2f} {theirs / mine:10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
