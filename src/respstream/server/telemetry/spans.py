"""Spans recorded without the SDK's per-span machinery, then handed to the SDK's span processor.

A response opens six or seven spans, and the SDK's ``Span`` (locks, bounded attribute maps, a processor call on
start, a context copy per attach) cost more per span than the rest of our per-response work per event: measured,
it made tracing every request cost a third of the gateway's throughput. A :class:`LeanSpan` is a slotted object with
a plain attribute dict; when it ends it becomes the SDK's own ``ReadableSpan`` and goes to the configured
``BatchSpanProcessor``, so sampling, ids, the resource, batching and the OTLP exporter are all still the SDK's.

Sampling: the SDK sampler (``OTEL_TRACES_SAMPLER``) decides for each trace's first span here (a request span,
with a client's ``traceparent`` as its remote parent); child spans follow that decision, which is what every
built-in sampler decides for them anyway (parent-based ones by definition; ``traceidratio``, ``always_on`` and
``always_off`` because the trace id is the same). ``RECORD_ONLY`` is treated as not sampled: nothing here reads
unexported spans. The current span is kept in a ``ContextVar`` of our own (asyncio tasks inherit it), which is also
where :func:`current_trace_headers` reads it for upstream requests.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["LeanSpan", "SpanRecorder", "current_trace_headers"]

_current: contextvars.ContextVar[LeanSpan | None] = contextvars.ContextVar("respstream_span", default=None)
_SAMPLED = 0x01


class LeanSpan:
    """One span while it is open; the ``with`` block makes it the current span. Attributes set to None are
    skipped (the GenAI convention: absent, not null). An unsampled span keeps its ids (for ``traceparent``) and
    records nothing."""

    __slots__ = ("_recorder", "_token", "attributes", "context", "kind", "name", "parent", "start_time", "status")

    def __init__(self, recorder: SpanRecorder, name: str, kind: Any, context: Any, parent: Any,
                 attributes: dict[str, Any] | None) -> None:
        self._recorder = recorder
        self._token: contextvars.Token[LeanSpan | None] | None = None
        self.name = name
        self.kind = kind
        self.context = context
        self.parent = parent
        self.attributes = attributes  # None: not sampled
        self.status: Any = None
        self.start_time = time.time_ns()

    @property
    def recording(self) -> bool:
        return self.attributes is not None

    def set_attribute(self, key: str, value: Any) -> None:
        if value is not None and self.attributes is not None:
            self.attributes[key] = tuple(value) if isinstance(value, list) else value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self.attributes is not None:
            for key, value in attributes.items():
                if value is not None:
                    self.attributes[key] = tuple(value) if isinstance(value, list) else value

    def record_error(self, exc: BaseException | None = None, error_type: str | None = None) -> None:
        """The GenAI convention for a failed operation: ``error.type`` and an ERROR status."""
        if self.attributes is None:
            return
        kind = error_type or (str(getattr(exc, "code", "")) or type(exc).__name__ if exc is not None else "error")
        self.attributes["error.type"] = kind
        self.status = self._recorder.error_status(str(exc)[:200] if exc is not None else kind)

    def update_name(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> LeanSpan:
        self._token = _current.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is not None and not isinstance(exc, GeneratorExit):
            self.record_error(exc)
        token, self._token = self._token, None
        if token is not None:
            try:
                _current.reset(token)
            except ValueError:  # ended in another context than it began (a generator finished elsewhere)
                _current.set(None)
        if self.attributes is not None:
            self._recorder.finish(self)


class SpanRecorder:
    """Starts :class:`LeanSpan` objects and turns the ended ones into SDK ``ReadableSpan`` for ``processor``."""

    def __init__(self, provider: Any, processor: Any, scope: Any) -> None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._sampler = provider.sampler
        self._ids = provider.id_generator
        self._resource = provider.resource
        self._processor = processor
        self._scope = scope
        self._readable = ReadableSpan
        self._span_context = SpanContext
        self._flags = {0: TraceFlags(0), _SAMPLED: TraceFlags(_SAMPLED)}
        self._trace_flags = TraceFlags
        self._unset = Status(StatusCode.UNSET)
        self._error = (Status, StatusCode.ERROR)
        self._propagator = TraceContextTextMapPropagator()

    def error_status(self, description: str) -> Any:
        status_class, error = self._error
        return status_class(error, description)

    def start(self, name: str, attributes: Mapping[str, Any] | None, kind: Any,
              parent_headers: Mapping[str, str] | None) -> LeanSpan:
        clean = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (attributes or {}).items() if v is not None}
        parent_span = None if parent_headers else _current.get()
        if parent_span is not None:  # a child: same trace, same decision
            parent = parent_span.context
            trace_id, sampled, state = parent.trace_id, parent_span.recording, parent.trace_state
        else:
            parent, sampled, state, trace_id = self._root_decision(name, kind, clean, parent_headers)
        flags = self._flags[_SAMPLED if sampled else 0]
        if parent is not None and parent.is_remote:  # keep the client's other flag bits
            flags = self._trace_flags((int(parent.trace_flags) & ~_SAMPLED) | (_SAMPLED if sampled else 0))
        context = self._span_context(trace_id, self._ids.generate_span_id(), is_remote=False, trace_flags=flags,
                                     trace_state=state)
        return LeanSpan(self, name, kind, context, parent, clean if sampled else None)

    def _root_decision(self, name: str, kind: Any, attributes: dict[str, Any],
                       parent_headers: Mapping[str, str] | None) -> tuple[Any, bool, Any, int]:
        """(parent context or None, sampled, trace state, trace id) of a trace's first span here."""
        from opentelemetry import trace

        parent_context = None
        parent = None
        if parent_headers:
            parent_context = self._propagator.extract(dict(parent_headers))
            remote = trace.get_current_span(parent_context).get_span_context()
            parent = remote if remote.is_valid else None
        trace_id = parent.trace_id if parent is not None else self._ids.generate_trace_id()
        result = self._sampler.should_sample(parent_context if parent is not None else None, trace_id, name, kind,
                                             attributes)
        if result.attributes:
            attributes.update(result.attributes)
        return parent, result.decision.is_sampled(), result.trace_state, trace_id

    def finish(self, span: LeanSpan) -> None:
        readable = self._readable(
            name=span.name, context=span.context, parent=span.parent, resource=self._resource,
            attributes=span.attributes, kind=span.kind, status=span.status or self._unset,
            start_time=span.start_time, end_time=time.time_ns(), instrumentation_scope=self._scope)
        self._processor.on_end(readable)


def current_trace_headers() -> dict[str, str]:
    """The W3C ``traceparent`` (and ``tracestate``) of the current span; ``{}`` outside any span."""
    span = _current.get()
    if span is None:
        return {}
    context = span.context
    headers = {"traceparent": f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"}
    state = context.trace_state
    if state:
        headers["tracestate"] = state.to_header()
    return headers
