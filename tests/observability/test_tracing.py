"""OpenTelemetry traces, end to end: the real gateway with the real OTLP/HTTP exporter, a SIMULATED collector
(tests/fakes/otlp_receiver.py) and SIMULATED Chat Completions upstreams (tests/fakes/chat_server.py), all on loopback.
The protobuf the exporter sent is decoded with opentelemetry-proto and the span tree is checked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, Status, finish, text, tool, usage
from fakes.otlp_receiver import OTLPReceiver, ReceivedSpan
from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

OPTIONS = {"idle_timeout": 2.0, "connect_timeout": 1.0, "retries": 0}
SERVER, CLIENT = 2, 3  # OTLP SpanKind values
ERROR = 2  # OTLP StatusCode.ERROR


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as r:
        yield r


@pytest.fixture
def upstreams() -> Iterator[tuple[FakeChatCompletionsServer, FakeChatCompletionsServer]]:
    with FakeChatCompletionsServer() as a, FakeChatCompletionsServer() as b:
        yield a, b


def _gateway(receiver: OTLPReceiver, *urls: str, **telemetry: object) -> ServerThread:
    config = Config(upstreams=list(urls), upstream_options=dict(OPTIONS),
                    telemetry={"otlp_endpoint": receiver.endpoint, **telemetry})
    return ServerThread(create_app(config))


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


def test_span_tree_of_a_tool_using_fallback_routed_response(
    receiver: OTLPReceiver, upstreams: tuple[FakeChatCompletionsServer, FakeChatCompletionsServer]
) -> None:
    a, b = upstreams
    a.script(Status(503, {"error": {"message": "overloaded"}}))
    b.script(tool(0, id="call_calc1", name="calculator", args='{"expression": "6 * 7"}'), finish("tool_calls"), Done())
    b.script(text("The answer is 42."), usage(31, 6), finish("stop"), Done())
    with _gateway(receiver, a.url, b.url) as gw:
        reply = httpx.post(f"{gw.base_url}/responses", json={"input": "Tell me something nice", "stream": False},
                           timeout=30)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["status"] == "completed" and body["output_text"] == "The answer is 42."
        spans = receiver.wait_for("POST /v1/responses")
    rid = body["id"]
    assert len({s.trace_id for s in spans}) == 1  # one trace for the whole request

    root = _one(spans, "POST /v1/responses")
    assert root.kind == SERVER and root.parent_span_id == ""
    assert root.attributes["http.route"] == "/v1/responses" and root.attributes["http.response.status_code"] == 200
    assert root.attributes["gen_ai.response.id"] == rid
    assert root.resource["service.name"] == "respstream"
    assert {s.name for s in _children(spans, root)} == {"route", "store create", "chat auto"}

    route = _one(spans, "route")
    assert route.attributes["gen_ai.request.model"] == "auto"
    assert route.attributes["respstream.route.source"] == "router"

    response = _one(spans, "chat auto")
    attrs = response.attributes
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "auto"
    assert attrs["gen_ai.response.id"] == rid and attrs["gen_ai.response.model"] == body["model"]
    assert attrs["gen_ai.usage.input_tokens"] == 31 and attrs["gen_ai.usage.output_tokens"] == 6
    assert attrs["gen_ai.response.finish_reasons"] == ["completed"]
    assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs  # content is opt-in

    kids = _children(spans, response)
    attempts = [s for s in kids if s.kind == CLIENT]
    # The first attempt (upstream A, 503) failed and was followed by the fallback to B, which ran two rounds.
    assert len(attempts) == 3 and all(s.name.startswith("chat ") for s in attempts)
    failed = [s for s in attempts if s.status_code == ERROR]
    assert len(failed) == 1 and failed[0].attributes["error.type"] == "upstream_error"
    assert failed[0].attributes["respstream.upstream"] != attempts[-1].attributes["respstream.upstream"]
    for attempt in attempts:
        assert attempt.attributes["gen_ai.operation.name"] == "chat"
        assert attempt.attributes["gen_ai.request.model"]
    assert "respstream.upstream.first_chunk_ms" in attempts[-1].attributes
    assert "respstream.upstream.connect_ms" in attempts[-1].attributes

    tool_span = _one(spans, "execute_tool calculator")
    assert tool_span.parent_span_id == response.span_id
    assert tool_span.attributes["gen_ai.tool.name"] == "calculator"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_calc1"
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["respstream.tool.status"] == "completed"
    assert "gen_ai.tool.call.arguments" not in tool_span.attributes

    assert _one(spans, "rewrite").parent_span_id == response.span_id
    assert _one(spans, "store finish").parent_span_id == response.span_id
    # The upstream requests carried the trace context of their attempt span.
    sent = [h.get("traceparent", "") for h in b.request_headers]
    assert len(sent) == 2 and all(p.split("-")[1] == root.trace_id for p in sent)
    assert {p.split("-")[2] for p in sent} <= {s.span_id for s in attempts}


def test_client_traceparent_is_the_parent_and_reaches_the_upstream(
    receiver: OTLPReceiver, upstreams: tuple[FakeChatCompletionsServer, FakeChatCompletionsServer]
) -> None:
    a, _ = upstreams
    a.script(text("Hi"), finish("stop"), Done())
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with _gateway(receiver, a.url) as gw:
        with httpx.stream("POST", f"{gw.base_url}/responses", json={"input": "hello", "stream": True},
                          headers={"traceparent": f"00-{trace_id}-{parent_id}-01"}, timeout=30) as reply:
            assert reply.status_code == 200
            assert b"response.completed" in reply.read()
        spans = receiver.wait_for("POST /v1/responses")
    root = _one(spans, "POST /v1/responses")
    assert root.trace_id == trace_id and root.parent_span_id == parent_id
    upstream_traceparent = a.request_headers[-1]["traceparent"]
    version, sent_trace, sent_span, flags = upstream_traceparent.split("-")
    assert (version, sent_trace, flags) == ("00", trace_id, "01")
    attempts = [s for s in spans if s.kind == CLIENT]
    assert len(attempts) == 1 and sent_span == attempts[0].span_id


def test_content_is_recorded_only_when_opted_in(
    receiver: OTLPReceiver, upstreams: tuple[FakeChatCompletionsServer, FakeChatCompletionsServer]
) -> None:
    a, _ = upstreams
    a.script(text("Secret answer"), finish("stop"), Done())
    with _gateway(receiver, a.url, record_content=True, max_content_chars=6) as gw:
        httpx.post(f"{gw.base_url}/responses", json={"input": "secret prompt", "stream": False}, timeout=30)
        spans = receiver.wait_for("POST /v1/responses")
    attrs = _one(spans, "chat auto").attributes
    assert attrs["gen_ai.input.messages"] == "secret"  # cut at max_content_chars
    assert attrs["gen_ai.output.messages"] == "Secret"


def test_no_endpoint_means_no_tracing_and_no_traceparent(
    upstreams: tuple[FakeChatCompletionsServer, FakeChatCompletionsServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    a, _ = upstreams
    a.script(text("Hi"), finish("stop"), Done())
    app = create_app(Config(upstreams=[a.url], upstream_options=dict(OPTIONS)))
    assert app.state.gateway.tracing.enabled is False
    with ServerThread(app) as gw:
        reply = httpx.post(f"{gw.base_url}/responses", json={"input": "hello", "stream": False}, timeout=30)
        assert reply.json()["status"] == "completed"
    assert "traceparent" not in a.request_headers[-1]


def test_standard_otel_variables_configure_the_exporter(
    receiver: OTLPReceiver, upstreams: tuple[FakeChatCompletionsServer, FakeChatCompletionsServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gateway-eu-1")
    a, _ = upstreams
    a.script(text("Hi"), finish("stop"), Done())
    with ServerThread(create_app(Config(upstreams=[a.url], upstream_options=dict(OPTIONS)))) as gw:
        httpx.post(f"{gw.base_url}/responses", json={"input": "hello", "stream": False}, timeout=30)
        spans = receiver.wait_for("POST /v1/responses")
    assert _one(spans, "POST /v1/responses").resource["service.name"] == "gateway-eu-1"
    assert receiver.content_types and all(c == "application/x-protobuf" for c in receiver.content_types)


def test_a_sample_ratio_of_zero_records_nothing_but_still_propagates(
    receiver: OTLPReceiver, upstreams: tuple[FakeChatCompletionsServer, FakeChatCompletionsServer]
) -> None:
    a, _ = upstreams
    for _ in range(3):
        a.script(text("Hi"), finish("stop"), Done())
    with _gateway(receiver, a.url, trace_sample_ratio=0.0) as gw:
        for _ in range(2):
            reply = httpx.post(f"{gw.base_url}/responses", json={"input": "hello", "stream": False}, timeout=30)
            assert reply.json()["status"] == "completed"
        # A client that sampled its trace is followed (parent-based), whatever the ratio.
        trace_id = "0af7651916cd43dd8448eb211c80319c"
        httpx.post(f"{gw.base_url}/responses", json={"input": "hello", "stream": False}, timeout=30,
                   headers={"traceparent": f"00-{trace_id}-b7ad6b7169203331-01"})
        spans = receiver.wait_for("POST /v1/responses")
    assert {s.trace_id for s in spans} == {trace_id}  # only the client-sampled request was recorded
    assert {"route", "store create", "chat auto", "rewrite", "store finish"} <= {s.name for s in spans}
    # The unsampled requests still told the upstream their trace, with the sampled flag clear.
    unsampled = [h["traceparent"] for h in a.request_headers[:2]]
    assert all(p.startswith("00-") and p.endswith("-00") for p in unsampled)
    assert len({p.split("-")[1] for p in unsampled}) == 2
    assert a.request_headers[2]["traceparent"].split("-")[1] == trace_id


@pytest.mark.parametrize("ratio", [-0.1, 1.5, "half"])
def test_a_bad_sample_ratio_is_refused_naming_the_key(ratio: object) -> None:
    from respstream.server.telemetry.settings import TelemetrySettings

    with pytest.raises(ValueError, match="trace_sample_ratio"):
        TelemetrySettings.from_mapping({"trace_sample_ratio": ratio})


def test_spans_ended_in_another_context_do_not_break_the_current_span() -> None:
    """A span opened in one task and closed in another (a generator finished elsewhere) still ends once."""
    import asyncio

    from respstream.server.telemetry.settings import TelemetrySettings
    from respstream.server.telemetry.spans import current_trace_headers
    from respstream.server.telemetry.tracing import Tracing

    tracing = Tracing(TelemetrySettings(traces="true", otlp_endpoint="http://127.0.0.1:9"))
    ended: list[Any] = []
    assert tracing._recorder is not None
    tracing._recorder.processor = type("P", (), {"on_end": lambda self, span: ended.append(span)})()
    try:
        span = tracing.span("outer")

        async def opener() -> None:
            span.__enter__()

        async def closer() -> None:
            span.__exit__(None, None, None)
            assert current_trace_headers() == {}

        asyncio.run(opener())
        asyncio.run(closer())
        assert [s.name for s in ended] == ["outer"]
    finally:
        tracing.shutdown()


def test_the_sdks_own_export_takes_our_spans_as_its_readable_spans(receiver: OTLPReceiver) -> None:
    """WireSpanExporter falls back to the SDK's own export (and encoder) should the SDK's HTTP client change; that
    path gets ``LeanSpan.readable()``: the SDK's own span type, which its exporter sends as it is."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from respstream.server.telemetry.settings import TelemetrySettings
    from respstream.server.telemetry.tracing import Tracing

    tracing = Tracing(TelemetrySettings(traces="true", otlp_endpoint=receiver.endpoint))
    recorder = tracing._recorder
    assert recorder is not None
    exporter = recorder.processor.span_exporter
    ended: list[Any] = []
    recorder.processor = type("P", (), {"on_end": lambda self, span: ended.append(span)})()
    try:
        with (tracing.span("POST /v1/responses", {"http.request.method": "POST"}, kind="server"),
              tracing.span("chat auto", {"gen_ai.usage.output_tokens": 3}) as response):
            response.record_error(error_type="upstream_error")
        assert OTLPSpanExporter.export(exporter, [span.readable() for span in ended]) == SpanExportResult.SUCCESS
        spans = receiver.wait_for("POST /v1/responses")
    finally:
        tracing.shutdown()
    response_span = _one(spans, "chat auto")
    assert response_span.parent_span_id == _one(spans, "POST /v1/responses").span_id
    assert response_span.attributes["gen_ai.usage.output_tokens"] == 3
    assert response_span.attributes["error.type"] == "upstream_error"
