"""SIMULATION of an OpenTelemetry collector: a real OTLP/HTTP receiver on 127.0.0.1 that keeps what it is sent.

``POST /v1/traces`` bodies are decoded with the official protobuf classes (``opentelemetry-proto``); ``spans()``
returns them flattened, with the resource's attributes. Nothing is forwarded anywhere.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["OTLPReceiver", "ReceivedSpan"]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int
    resource: dict[str, Any]


class OTLPReceiver:
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.path == "/v1/traces":
                    message = ExportTraceServiceRequest()
                    message.ParseFromString(body)
                    receiver.requests.append(message)
                    receiver.content_types.append(self.headers.get("content-type", ""))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OTLPReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[ReceivedSpan]:
        found: list[ReceivedSpan] = []
        for request in list(self.requests):
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(ReceivedSpan(
                            name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(), kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            status_code=span.status.code, resource=resource))
        return found

    def wait_for(self, name: str, *, count: int = 1, timeout: float = 15.0) -> list[ReceivedSpan]:
        """All spans once at least ``count`` named ``name`` arrived (the SDK exports in batches)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if sum(1 for s in spans if s.name == name) >= count:
                return spans
            time.sleep(0.05)
        raise AssertionError(f"no {count} span(s) named {name!r} within {timeout} s: "
                             f"{sorted({s.name for s in self.spans()})}")
