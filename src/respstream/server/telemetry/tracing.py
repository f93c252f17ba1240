"""OpenTelemetry traces with the GenAI semantic conventions, exported over OTLP/HTTP; nothing at all when off.

The tree of one ``POST /v1/responses``::

    POST /v1/responses                      SERVER  http.request.method, http.route, http.response.status_code
      route                                 INTERNAL respstream.route.category/.source, gen_ai.request.model
      store create
      chat auto                             INTERNAL the response: gen_ai.response.id/.model, usage, finish reasons
        chat <model>                        CLIENT  one per upstream attempt (a fallback is a second one)
        execute_tool <name>                 INTERNAL gen_ai.tool.name, gen_ai.tool.call.id
        rewrite
        store finish

The response span lives in the generation task, which inherits the request span's context (asyncio copies
contextvars into a task), so a background response is still a child of the request that created it. A W3C
``traceparent`` from the client is the parent of the request span, and every upstream request carries the
``traceparent`` of its attempt span.

The OpenTelemetry SDK is an optional extra (``otel``); without it, or with tracing off, every call here is a
shared no-op context manager. With it, the SDK provides the sampler, ids, resource, batching and OTLP exporter;
spans themselves are recorded by :mod:`spans` (the SDK's own ``Span`` cost too much per span) and their export
bodies written by :mod:`otlp_wire`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Mapping
from typing import Any

from respstream.server.telemetry.settings import TelemetrySettings
from respstream.server.telemetry.spans import NO_SPAN, NO_SPAN_CM, SpanRecorder, current_trace_headers

__all__ = ["NO_SPAN", "Tracing", "trace_headers"]

log = logging.getLogger("respstream.telemetry")
_active = False  # any Tracing enabled in this process: trace_headers() does nothing until then




@functools.cache
def _kinds() -> dict[str, Any]:
    from opentelemetry.trace import SpanKind

    return {"server": SpanKind.SERVER, "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}


class Tracing:
    """Spans for one app. ``enabled`` is False when tracing is off or the ``otel`` extra is missing."""

    def __init__(self, settings: TelemetrySettings | None = None) -> None:
        global _active
        self.settings = settings or TelemetrySettings()
        self.enabled = False
        self._provider: Any = None
        self._recorder: SpanRecorder | None = None
        endpoint = self.settings.traces_endpoint()
        if endpoint is None:
            return
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope

            from respstream.server.telemetry.exporter import wire_span_exporter
        except ImportError:
            log.warning("tracing is configured (%s) but the OpenTelemetry SDK is not installed: "
                        "pip install 'respstream[otel]'", endpoint)
            return
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which win over the config.
        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        resource = Resource.create({} if named else {"service.name": self.settings.service_name})
        self._provider = TracerProvider(resource=resource, sampler=self._sampler())
        exporter = wire_span_exporter(endpoint, self.settings.export_timeout_seconds)
        # Batches every 0.5 s unless OTEL_BSP_SCHEDULE_DELAY says otherwise (the SDK reads the OTEL_BSP_* variables).
        delay = None if os.environ.get("OTEL_BSP_SCHEDULE_DELAY") else 500
        processor = BatchSpanProcessor(exporter, schedule_delay_millis=delay)
        self._provider.add_span_processor(processor)
        self._recorder = SpanRecorder(self._provider, processor, InstrumentationScope("respstream", _version()))
        self.enabled = True
        _active = True
        log.info("tracing: spans go to %s (sampler: %s)", endpoint,
                 getattr(self._provider.sampler, "get_description", lambda: "?")())

    def _sampler(self) -> Any:
        """None (the SDK reads OTEL_TRACES_SAMPLER, default parent-based always-on) unless the config asks for a
        ratio and the environment names no sampler."""
        ratio = self.settings.trace_sample_ratio
        if ratio >= 1.0 or os.environ.get("OTEL_TRACES_SAMPLER"):
            return None
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        return ParentBased(TraceIdRatioBased(ratio))

    def span(self, name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal",
             parent_headers: Mapping[str, str] | None = None) -> contextlib.AbstractContextManager[Any]:
        """A span made current for the ``with`` block. ``parent_headers``: take the parent from a W3C
        ``traceparent`` (the request span). Exceptions leaving the block mark the span as an error."""
        if self._recorder is None:
            return NO_SPAN_CM
        return self._recorder.start(name, attributes, _kinds()[kind], parent_headers)

    def content(self, text: str) -> str | None:
        """``text`` for a span attribute when the operator opted in (cut to ``max_content_chars``), else None."""
        if not (self.enabled and self.settings.record_content):
            return None
        return text[: self.settings.max_content_chars]

    def shutdown(self) -> None:
        """Flush what is pending (bounded by the exporter timeout) and stop the export thread."""
        if self._provider is not None:
            with contextlib.suppress(Exception):
                self._provider.shutdown()
            self._provider = None
            self._recorder = None
            self.enabled = False


def trace_headers() -> dict[str, str]:
    """The ``traceparent`` (and ``tracestate``) of the current span for an outgoing request; ``{}`` when none."""
    return current_trace_headers() if _active else {}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("respstream")
    except PackageNotFoundError:
        return ""
