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
shared no-op context manager.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Mapping
from typing import Any

from respstream.server.telemetry.settings import TelemetrySettings

__all__ = ["NO_SPAN", "Tracing", "trace_headers"]

log = logging.getLogger("respstream.telemetry")
_active = False  # any Tracing enabled in this process: trace_headers() does nothing until then


class _NoSpan:
    """What a disabled tracer hands out: accepts everything, records nothing."""

    __slots__ = ()

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def record_error(self, exc: BaseException | None = None, error_type: str | None = None) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass


NO_SPAN = _NoSpan()
_NO_SPAN_CM = contextlib.nullcontext(NO_SPAN)


class _Span:
    """A thin wrapper of an SDK span with the error convention of the GenAI spec (``error.type`` + status)."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set_attribute(self, key: str, value: Any) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def record_error(self, exc: BaseException | None = None, error_type: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        kind = error_type or (str(getattr(exc, "code", "")) or type(exc).__name__ if exc is not None else "error")
        self._span.set_attribute("error.type", kind)
        self._span.set_status(Status(StatusCode.ERROR, str(exc)[:200] if exc is not None else kind))

    def update_name(self, name: str) -> None:
        self._span.update_name(name)


class _SpanScope:
    """``with`` one SDK span as the current one. A plain class, not a generator context manager: this runs several
    times per response, and each layer of wrapping costs microseconds here."""

    __slots__ = ("_attributes", "_kind", "_name", "_parent", "_span", "_token", "_tracer")

    def __init__(self, tracer: Any, name: str, attributes: Mapping[str, Any] | None, kind: str,
                 parent_headers: Mapping[str, str] | None) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes
        self._kind = kind
        self._parent = parent_headers
        self._span: Any = None
        self._token: Any = None

    def __enter__(self) -> _Span:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        parent = _propagator().extract(dict(self._parent)) if self._parent else None
        clean = {k: v for k, v in (self._attributes or {}).items() if v is not None}
        self._span = self._tracer.start_span(self._name, context=parent, kind=_kinds()[self._kind], attributes=clean)
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return _Span(self._span)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        from opentelemetry import context as otel_context

        if exc is not None and not isinstance(exc, GeneratorExit):
            _Span(self._span).record_error(exc)
        self._span.end()
        otel_context.detach(self._token)


@functools.cache
def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


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
        self._tracer: Any = None
        endpoint = self.settings.traces_endpoint()
        if endpoint is None:
            return
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            log.warning("tracing is configured (%s) but the OpenTelemetry SDK is not installed: "
                        "pip install 'respstream[otel]'", endpoint)
            return
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which win over the config.
        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        resource = Resource.create({} if named else {"service.name": self.settings.service_name})
        self._provider = TracerProvider(resource=resource)  # its sampler follows OTEL_TRACES_SAMPLER
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=self.settings.export_timeout_seconds)
        self._provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
        self._tracer = self._provider.get_tracer("respstream")
        self.enabled = True
        _active = True
        log.info("tracing: spans go to %s", endpoint)

    def span(self, name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal",
             parent_headers: Mapping[str, str] | None = None) -> contextlib.AbstractContextManager[Any]:
        """A span made current for the ``with`` block. ``parent_headers``: take the parent from a W3C
        ``traceparent`` (the request span). Exceptions leaving the block mark the span as an error."""
        if not self.enabled:
            return _NO_SPAN_CM
        return _SpanScope(self._tracer, name, attributes, kind, parent_headers)

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
            self.enabled = False


def trace_headers() -> dict[str, str]:
    """The ``traceparent`` (and ``tracestate``) of the current span for an outgoing request; ``{}`` when none."""
    if not _active:
        return {}
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    return carrier
