"""Observability: OpenTelemetry GenAI traces, per-request observations, structured logs and the Prometheus metrics
(``metrics.py``). See docs/operations.md. The lowest server layer: it imports nothing else of the server."""

from respstream.server.telemetry.logs import configure_logging, log_access
from respstream.server.telemetry.observation import (
    RequestObservation,
    UpstreamAttempt,
    current_attempt,
    current_request,
    mark_upstream_phase,
)
from respstream.server.telemetry.settings import LoggingSettings, TelemetrySettings
from respstream.server.telemetry.tracing import NO_SPAN, Tracing, trace_headers

__all__ = [
    "NO_SPAN",
    "LoggingSettings",
    "RequestObservation",
    "TelemetrySettings",
    "Tracing",
    "UpstreamAttempt",
    "configure_logging",
    "current_attempt",
    "current_request",
    "log_access",
    "mark_upstream_phase",
    "trace_headers",
]
