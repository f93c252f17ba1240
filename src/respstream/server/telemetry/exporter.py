"""The OTLP/HTTP span exporter with the body written by :mod:`otlp_wire` instead of the SDK's message objects.

Everything else is the SDK's ``OTLPSpanExporter``: endpoint, headers, compression, timeout, TLS and retries from
the ``OTEL_EXPORTER_OTLP_*`` variables. It hands the SDK's HTTP client our bytes; if that client is not there (an
SDK version that changed it), the SDK's own ``export`` runs instead, so spans are never lost to a version change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from respstream.server.telemetry.otlp_wire import encode_export_request

__all__ = ["wire_span_exporter"]

log = logging.getLogger("respstream.telemetry")


def wire_span_exporter(endpoint: str, timeout: float) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    class WireSpanExporter(OTLPSpanExporter):  # type: ignore[misc]
        def export(self, spans: Sequence[Any]) -> Any:
            client = getattr(self, "_client", None)
            if getattr(self, "_shutdown", False) or not hasattr(client, "export"):
                # The SDK's own encoder expects its own span type.
                return super().export([s.readable() if hasattr(s, "readable") else s for s in spans])
            try:
                body = encode_export_request(spans)
            except Exception:
                log.exception("tracing: %d spans could not be encoded", len(spans))
                return SpanExportResult.FAILURE
            limit = getattr(self, "_max_request_size", None)
            if isinstance(limit, int) and len(body) > limit:
                log.warning("tracing: dropped %d spans: %d bytes is over the exporter's limit of %d",
                            len(spans), len(body), limit)
                return SpanExportResult.FAILURE
            result = client.export(body)  # type: ignore[union-attr]
            return SpanExportResult.SUCCESS if getattr(result, "success", False) else SpanExportResult.FAILURE

    return WireSpanExporter(endpoint=endpoint, timeout=timeout)
