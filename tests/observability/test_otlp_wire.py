"""The hand-written OTLP body (server/telemetry/otlp_wire.py) against the official protobuf classes: what it writes
decodes to exactly what the SDK's own encoder produces for the same spans (real SDK spans, with events, links,
errors, remote parents, every attribute type), apart from ``flags``, where it also carries the W3C trace flags as
the OTLP spec says."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from respstream.server.telemetry.otlp_wire import encode_export_request

HAS_IS_REMOTE, IS_REMOTE = 0x100, 0x200


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _tracer(service: str = "test", scope: str = "scope-a") -> tuple[Any, _Keep]:
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment": "eu-1"}))
    provider.add_span_processor(SimpleSpanProcessor(keep))
    return provider.get_tracer(scope, "1.2.3"), keep


def _decode(body: bytes) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    return message


def _spans(message: ExportTraceServiceRequest) -> Iterator[Any]:
    for resource_spans in message.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def _same_as_sdk(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    """Our encoding, decoded, after checking it equals the SDK's (its ``flags`` then set to the SDK's values)."""
    ours = _decode(encode_export_request(spans))
    sdk = _decode(encode_spans(spans).SerializeToString())
    for a, b, span in zip(_spans(ours), _spans(sdk), spans, strict=True):
        expected = int(span.context.trace_flags) | b.flags
        assert a.flags == expected, (span.name, hex(a.flags), hex(expected))
        for link_a, link_b, link in zip(a.links, b.links, span.links, strict=True):
            assert link_a.flags == int(link.context.trace_flags) | link_b.flags
            link_a.flags = link_b.flags
        a.flags = b.flags
    assert ours == sdk
    return ours


ATTRIBUTES: dict[str, Any] = {
    "str": "chat", "empty": "", "unicode": "Grüße, 東京 🚀", "true": True, "false": False, "zero": 0,
    "negative": -5, "int64 min": -(2**63), "int64 max": 2**63 - 1, "float": 1.5, "float zero": 0.0,
    "strings": ["completed", "incomplete"], "ints": [1, -2, 3], "bools": [True, False], "floats": [0.25],
    "long": "x" * 5000,
}


def test_a_span_tree_with_every_attribute_type_encodes_like_the_sdk() -> None:
    tracer, keep = _tracer()
    with tracer.start_as_current_span("POST /v1/responses", kind=SpanKind.SERVER, attributes=ATTRIBUTES):
        with tracer.start_as_current_span("chat auto") as response:
            response.add_event("first token", {"ms": 12.5, "model": "m"})
            response.add_event("plain")
            with tracer.start_as_current_span("chat m", kind=SpanKind.CLIENT) as attempt:
                attempt.set_status(Status(StatusCode.ERROR, "upstream answered 503"))
            tracer.start_span("ok", kind=SpanKind.PRODUCER).set_status(Status(StatusCode.OK))
        tracer.start_span("consumer", kind=SpanKind.CONSUMER).end()
    assert len(keep.spans) == 4
    decoded = _same_as_sdk(keep.spans)
    names = {s.name: s for s in _spans(decoded)}
    assert names["chat m"].status.message == "upstream answered 503"
    assert names["POST /v1/responses"].kind == 2 and names["chat m"].kind == 3  # OTLP SERVER, CLIENT


def test_remote_parents_links_and_trace_state_encode_like_the_sdk() -> None:
    tracer, keep = _tracer()
    remote = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=True,
                         trace_flags=TraceFlags(1), trace_state=trace.TraceState([("vendor", "abc"), ("b", "1")]))
    parent = trace.set_span_in_context(NonRecordingSpan(remote))
    other = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("server", context=parent, links=[Link(other, {"why": "batch"})]):
        pass
    _same_as_sdk(keep.spans)
    (span,) = list(_spans(_decode(encode_export_request(keep.spans))))
    assert span.parent_span_id == (0x00F067AA0BA902B7).to_bytes(8, "big")
    assert span.trace_state == "vendor=abc,b=1"
    assert span.flags & (HAS_IS_REMOTE | IS_REMOTE) == HAS_IS_REMOTE | IS_REMOTE
    assert span.flags & 0xFF == 1
    assert span.links[0].attributes[0].value.string_value == "batch"


def test_spans_of_several_resources_and_scopes_are_grouped_in_order() -> None:
    tracer_a, keep_a = _tracer("svc-a", "scope-a")
    tracer_b, keep_b = _tracer("svc-b", "scope-b")
    for tracer in (tracer_a, tracer_b, tracer_a):
        tracer.start_span("s").end()
    spans = [keep_a.spans[0], keep_b.spans[0], keep_a.spans[1]]
    decoded = _same_as_sdk(spans)
    assert [len(r.scope_spans[0].spans) for r in decoded.resource_spans] == [2, 1]
    services = [{a.key: a.value.string_value for a in r.resource.attributes}["service.name"]
                for r in decoded.resource_spans]
    assert services == ["svc-a", "svc-b"]
    assert decoded.resource_spans[1].scope_spans[0].scope.name == "scope-b"
    assert decoded.resource_spans[1].scope_spans[0].scope.version == "1.2.3"


def test_text_that_is_not_utf8_is_replaced_not_a_lost_batch() -> None:
    tracer, keep = _tracer()
    tracer.start_span("s", attributes={"content": "a\ud800b"}).end()
    decoded = _decode(encode_export_request(keep.spans))  # the SDK's encoder drops the attribute and logs
    (span,) = list(_spans(decoded))
    assert span.attributes[0].value.string_value == "a?b"  # the "replace" error handler of str.encode


def test_an_empty_batch_is_an_empty_request() -> None:
    assert encode_export_request([]) == b""
    assert _decode(b"") == ExportTraceServiceRequest()


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16_383, 16_384, 2_097_152])
def test_length_prefixes_at_varint_boundaries(size: int) -> None:
    tracer, keep = _tracer()
    tracer.start_span("s", attributes={"blob": "y" * size}).end()
    _same_as_sdk(keep.spans)


def _recording_tracing(ratio: float = 1.0) -> tuple[Any, list[Any]]:
    """The gateway's own Tracing with its processor replaced by a list: the ended spans, as recorded."""
    from respstream.server.telemetry.settings import TelemetrySettings
    from respstream.server.telemetry.tracing import Tracing

    tracing = Tracing(TelemetrySettings(traces="true", otlp_endpoint="http://127.0.0.1:9", trace_sample_ratio=ratio))
    ended: list[Any] = []
    assert tracing._recorder is not None
    tracing._recorder.processor = type("P", (), {"on_end": lambda self, span: ended.append(span)})()
    return tracing, ended


def test_the_gateways_lean_spans_encode_like_their_sdk_readable_spans() -> None:
    """LeanSpan goes to the processor and encoder as it is; the SDK's encoder reads its ReadableSpan twin, and
    both bodies are the same bytes (so, by the tests above, the same message as the SDK's)."""
    tracing, ended = _recording_tracing()
    client = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", "tracestate": "vendor=abc"}
    try:
        with tracing.span("POST /v1/responses", {"http.request.method": "POST", "none": None, "list": ["a", "b"]},
                          kind="server", parent_headers=client) as request:
            with tracing.span("chat auto", {"gen_ai.request.model": "auto"}) as response:
                with tracing.span("chat m", {"gen_ai.operation.name": "chat"}, kind="client") as attempt:
                    attempt.set_attribute("respstream.upstream.connect_ms", 1.25)
                    attempt.record_error(error_type="upstream_error")
                with pytest.raises(RuntimeError), tracing.span("execute_tool web_search", {"n": 3}):
                    raise RuntimeError("tool broke")
                response.set_attributes({"gen_ai.usage.output_tokens": 7, "gen_ai.response.finish_reasons": ["stop"]})
            request.update_name("POST /v1/responses")
        with tracing.span("route", {"unicode": "Grüße 🚀", "float": 0.5, "bool": True}):
            pass
    finally:
        tracing.shutdown()
    assert [s.name for s in ended] == ["chat m", "execute_tool web_search", "chat auto", "POST /v1/responses",
                                       "route"]
    readable = [span.readable() for span in ended]
    assert all(isinstance(span, ReadableSpan) for span in readable)
    assert encode_export_request(ended) == encode_export_request(readable)
    decoded = {s.name: s for s in _spans(_same_as_sdk(readable))}
    assert decoded["POST /v1/responses"].trace_id.hex() == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert decoded["POST /v1/responses"].trace_state == "vendor=abc"
    ours = {s.name: s for s in _spans(_decode(encode_export_request(ended)))}
    assert ours["POST /v1/responses"].flags & 0xFF == 0x03  # the client's other flag bit is kept
    assert decoded["chat m"].parent_span_id == decoded["chat auto"].span_id
    assert decoded["chat m"].status.code == StatusCode.ERROR.value
    assert decoded["execute_tool web_search"].status.message == "tool broke"
    assert decoded["route"].parent_span_id == b""  # a new trace: no parent
    assert decoded["route"].trace_id != decoded["chat m"].trace_id


def test_children_of_an_unsampled_span_are_not_made_and_the_upstream_gets_its_traceparent() -> None:
    from respstream.server.telemetry.spans import current_trace_headers

    tracing, ended = _recording_tracing(ratio=0.0)
    try:
        with tracing.span("POST /v1/responses", kind="server") as request:
            with tracing.span("chat auto") as response, tracing.span("chat m", kind="client") as attempt:
                attempt.set_attribute("x", 1)  # accepted, recorded nowhere
                attempt.record_error(error_type="e")
                headers = current_trace_headers()
            assert response is attempt  # the one shared unrecorded span
            assert current_trace_headers() == headers
    finally:
        tracing.shutdown()
    assert ended == []
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, flags) == ("00", "00")
    assert (int(trace_id, 16), int(span_id, 16)) == (request.trace_id, request.span_id)


def test_an_ended_span_no_longer_changes() -> None:
    """After its end a span is the export thread's: later changes (a late callback) are ignored, not raced."""
    tracing, ended = _recording_tracing()
    try:
        with tracing.span("chat auto", {"a": 1}) as span:
            pass
        before = encode_export_request(ended)
        span.set_attribute("b", 2)
        span.set_attributes({"c": 3})
        span.record_error(error_type="late")
    finally:
        tracing.shutdown()
    assert ended[0].attributes == {"a": 1} and encode_export_request(ended) == before
