"""Spans recorded without the SDK's per-span machinery, then handed to the SDK's span processor.

A response opens six or seven spans, and the SDK's ``Span`` (locks, bounded attribute maps, a processor call on
start, a context copy per attach) cost more per span than the rest of our per-response work per event: measured,
it made tracing every request cost a third of the gateway's throughput. A :class:`LeanSpan` is a slotted object with
a plain attribute dict that reads like the SDK's ``ReadableSpan`` (the properties the SDK's processor and exporters
use: ``context``, ``parent``, ``attributes``, ``events``, ...), so when it ends it goes as it is to the configured
``BatchSpanProcessor``; sampling, ids, the resource, batching and the OTLP exporter are all still the SDK's.
:meth:`LeanSpan.readable` makes the SDK's own ``ReadableSpan`` of it for code that needs exactly that type.

Sampling: the SDK sampler (``OTEL_TRACES_SAMPLER``) decides for each trace's first span here (a request span,
with a client's ``traceparent`` as its remote parent); child spans follow that decision, which is what every
built-in sampler decides for them anyway (parent-based ones by definition; ``traceidratio``, ``always_on`` and
``always_off`` because the trace id is the same). ``RECORD_ONLY`` is treated as not sampled: nothing here reads
unexported spans. The children of an unsampled span are not made at all: an upstream request inside one carries
the unsampled span's own ``traceparent`` (sampled flag clear), which tells the upstream all it can use.

The current span is kept in a ``ContextVar`` of our own (asyncio tasks inherit it), which is also where
:func:`current_trace_headers` reads it for upstream requests.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["NO_SPAN", "NO_SPAN_CM", "LeanSpan", "NoSpan", "SpanRecorder", "current_trace_headers"]

_current: contextvars.ContextVar[LeanSpan | None] = contextvars.ContextVar("respstream_span", default=None)
_SAMPLED = 0x01


class NoSpan:
    """What a disabled tracer hands out, and what a child of an unsampled span is: accepts everything, records
    nothing, and is never the current span."""

    __slots__ = ()

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def record_error(self, exc: BaseException | None = None, error_type: str | None = None) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass


NO_SPAN = NoSpan()
NO_SPAN_CM = contextlib.nullcontext(NO_SPAN)


class LeanSpan:
    """One span; the ``with`` block makes it the current span. Attributes set to None are skipped (the GenAI
    convention: absent, not null). An unsampled span keeps its ids (for ``traceparent``) and records nothing.

    It is its own span context (``context`` is the span: ``trace_id``, ``span_id``, ``trace_flags``,
    ``trace_state``, ``is_remote``), so starting one builds no SDK ``SpanContext``."""

    __slots__ = ("_recorder", "_token", "attributes", "end_time", "kind", "name", "parent", "span_id",
                 "start_time", "status", "trace_flags", "trace_id", "trace_state")

    is_remote = False
    events: tuple[Any, ...] = ()
    links: tuple[Any, ...] = ()
    dropped_attributes = 0
    dropped_events = 0
    dropped_links = 0

    def __init__(self, recorder: SpanRecorder, name: str, kind: Any, trace_id: int, span_id: int, trace_flags: Any,
                 trace_state: Any, parent: Any, attributes: dict[str, Any] | None) -> None:
        self._recorder = recorder
        self._token: contextvars.Token[LeanSpan | None] | None = None
        self.name = name
        self.kind = kind
        self.trace_id = trace_id
        self.span_id = span_id
        self.trace_flags = trace_flags
        self.trace_state = trace_state
        self.parent = parent  # a LeanSpan, a remote SpanContext or None
        self.attributes = attributes  # None: not sampled
        self.status: Any = None
        self.start_time = time.time_ns()
        self.end_time: int | None = None

    @property
    def context(self) -> LeanSpan:
        return self

    @property
    def is_valid(self) -> bool:
        return True  # ids come from the SDK's id generator or a validated traceparent

    @property
    def resource(self) -> Any:
        return self._recorder.resource

    @property
    def instrumentation_scope(self) -> Any:
        return self._recorder.scope

    # Once ended, a span belongs to the export thread, which may be encoding its attributes: changes are ignored.

    def set_attribute(self, key: str, value: Any) -> None:
        if value is not None and self.attributes is not None and self.end_time is None:
            self.attributes[key] = tuple(value) if isinstance(value, list) else value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self.attributes is not None and self.end_time is None:
            for key, value in attributes.items():
                if value is not None:
                    self.attributes[key] = tuple(value) if isinstance(value, list) else value

    def record_error(self, exc: BaseException | None = None, error_type: str | None = None) -> None:
        """The GenAI convention for a failed operation: ``error.type`` and an ERROR status."""
        if self.attributes is None or self.end_time is not None:
            return
        kind = error_type or (str(getattr(exc, "code", "")) or type(exc).__name__ if exc is not None else "error")
        self.attributes["error.type"] = kind
        self.status = self._recorder.error_status(str(exc)[:200] if exc is not None else kind)

    def update_name(self, name: str) -> None:
        self.name = name

    def readable(self) -> Any:
        """The SDK's own ``ReadableSpan`` of this (ended) span."""
        return self._recorder.readable(self)

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
        if self.attributes is not None and self.end_time is None:
            self.end_time = time.time_ns()
            if self.status is None:
                self.status = self._recorder.unset
            self._recorder.processor.on_end(self)


class SpanRecorder:
    """Starts :class:`LeanSpan` objects; the ended ones go to ``processor``."""

    def __init__(self, provider: Any, processor: Any, scope: Any) -> None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._sampler = provider.sampler
        self._span_id = provider.id_generator.generate_span_id
        self._trace_id = provider.id_generator.generate_trace_id
        self.resource = provider.resource
        self.processor = processor
        self.scope = scope
        self._readable = ReadableSpan
        self._span_context = SpanContext
        self._flags = {0: TraceFlags(0), _SAMPLED: TraceFlags(_SAMPLED)}
        self._trace_flags = TraceFlags
        self.unset = Status(StatusCode.UNSET)
        self._error = (Status, StatusCode.ERROR)
        self._propagator = TraceContextTextMapPropagator()

    def error_status(self, description: str) -> Any:
        status_class, error = self._error
        return status_class(error, description)

    def start(self, name: str, attributes: Mapping[str, Any] | None, kind: Any,
              parent_headers: Mapping[str, str] | None) -> contextlib.AbstractContextManager[Any]:
        parent_span = None if parent_headers else _current.get()
        if parent_span is not None:  # a child: same trace, same decision
            if parent_span.attributes is None:
                return NO_SPAN_CM
            return LeanSpan(self, name, kind, parent_span.trace_id, self._span_id(), parent_span.trace_flags,
                            parent_span.trace_state, parent_span, _clean(attributes))
        clean = _clean(attributes)
        parent, sampled, state, trace_id = self._root_decision(name, kind, clean, parent_headers)
        flags = self._flags[_SAMPLED if sampled else 0]
        if parent is not None:  # a remote parent: keep the client's other flag bits
            flags = self._trace_flags((int(parent.trace_flags) & ~_SAMPLED) | (_SAMPLED if sampled else 0))
        return LeanSpan(self, name, kind, trace_id, self._span_id(), flags, state, parent,
                        clean if sampled else None)

    def _root_decision(self, name: str, kind: Any, attributes: dict[str, Any],
                       parent_headers: Mapping[str, str] | None) -> tuple[Any, bool, Any, int]:
        """(remote parent context or None, sampled, trace state, trace id) of a trace's first span here."""
        parent_context = None
        parent = None
        if parent_headers:
            from opentelemetry import trace

            parent_context = self._propagator.extract(dict(parent_headers))
            remote = trace.get_current_span(parent_context).get_span_context()
            parent = remote if remote.is_valid else None
        trace_id = parent.trace_id if parent is not None else self._trace_id()
        result = self._sampler.should_sample(parent_context if parent is not None else None, trace_id, name, kind,
                                             attributes)
        if result.attributes:
            attributes.update(result.attributes)
        return parent, result.decision.is_sampled(), result.trace_state, trace_id

    def readable(self, span: LeanSpan) -> Any:
        parent = span.parent
        if isinstance(parent, LeanSpan):
            parent = self._context(parent)
        return self._readable(
            name=span.name, context=self._context(span), parent=parent, resource=self.resource,
            attributes=span.attributes, kind=span.kind, status=span.status or self.unset,
            start_time=span.start_time, end_time=span.end_time, instrumentation_scope=self.scope)

    def _context(self, span: LeanSpan) -> Any:
        return self._span_context(span.trace_id, span.span_id, is_remote=False, trace_flags=span.trace_flags,
                                  trace_state=span.trace_state)


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in attributes.items() if v is not None}


def current_trace_headers() -> dict[str, str]:
    """The W3C ``traceparent`` (and ``tracestate``) of the current span; ``{}`` outside any span."""
    span = _current.get()
    if span is None:
        return {}
    headers = {"traceparent": f"00-{span.trace_id:032x}-{span.span_id:016x}-{int(span.trace_flags):02x}"}
    state = span.trace_state
    if state:
        headers["tracestate"] = state.to_header()
    return headers
