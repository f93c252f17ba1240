"""One response's telemetry: its span, first-token time, upstream attempts, tool runs and the rewrite pass.

The pipeline holds a :class:`ResponseTelemetry` (a shared no-op one unless the service gives it a real one) and
calls it at a handful of points; everything below the per-chunk loop is at most one boolean test per chunk.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from respstream.server.telemetry.observation import (
    RequestObservation,
    UpstreamAttempt,
    reset_attempt,
    set_attempt,
)
from respstream.server.telemetry.settings import TelemetrySettings
from respstream.server.telemetry.spans import NO_SPAN_CM
from respstream.server.telemetry.tracing import NO_SPAN, Tracing

__all__ = ["NULL_TELEMETRY", "ResponseTelemetry"]


class ResponseTelemetry:
    def __init__(self, *, metrics: Any, tracing: Tracing, started: float,
                 observation: RequestObservation | None) -> None:
        self.metrics = metrics
        self.tracing = tracing
        self.started = started  # time.perf_counter() when the request reached the service
        self.observation = observation
        self.first_token_seconds: float | None = None
        self.model = ""

    def first_token(self) -> None:
        """The first generated chunk of the response (text, reasoning, refusal or tool arguments)."""
        if self.first_token_seconds is not None:
            return
        seconds = time.perf_counter() - self.started
        self.first_token_seconds = seconds
        if self.metrics is not None:
            self.metrics.first_token(self.model or "unknown", seconds)
        if self.observation is not None:
            self.observation.first_token_seconds = seconds

    @contextlib.contextmanager
    def upstream_attempt(self, upstream: Any, model: str) -> Iterator[UpstreamAttempt]:
        """A CLIENT span ``chat <model>`` and the current :class:`UpstreamAttempt` for the adapter's phase marks."""
        self.model = model
        name = getattr(upstream, "name", "upstream")
        span_cm: contextlib.AbstractContextManager[Any] = NO_SPAN_CM  # tracing off: no name, attributes (issue 41)
        if self.tracing.enabled:
            span_cm = self.tracing.span(f"chat {model}", {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": "openai",
                "respstream.upstream": name, "server.address": getattr(upstream, "host", None)}, kind="client")
        with span_cm as span:
            attempt = UpstreamAttempt(upstream=name, metrics=self.metrics, span=span)
            token = set_attempt(attempt)
            try:
                yield attempt
            except Exception as exc:
                code = str(getattr(exc, "code", type(exc).__name__))
                if self.metrics is not None:
                    self.metrics.upstream_failure(name, code)
                raise
            finally:
                reset_attempt(token)

    def span(self, name: str, attributes: dict[str, Any] | None = None) -> contextlib.AbstractContextManager[Any]:
        return self.tracing.span(name, attributes)

    @contextlib.contextmanager
    def tool(self, name: str, call_id: str, arguments: str) -> Iterator[dict[str, Any]]:
        """An ``execute_tool <name>`` span; the caller puts the outcome in the yielded dict (``status``)."""
        outcome: dict[str, Any] = {"status": "failed"}
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                      "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "extension",
                      "gen_ai.tool.call.arguments": self.tracing.content(arguments)}
        began = time.perf_counter()
        with self.tracing.span(f"execute_tool {name}", attributes) as span:
            try:
                yield outcome
            finally:
                seconds = time.perf_counter() - began
                span.set_attribute("respstream.tool.status", outcome["status"])
                if outcome["status"] != "completed":
                    span.record_error(error_type=f"tool_{outcome['status']}")
                if self.metrics is not None:
                    self.metrics.tool_seconds(name, seconds)


    def observe_end(self, pipeline: Any, record: Any, span: Any, *, dialect: str) -> None:
        """Metrics, span attributes and the access-log fields of a response that has ended (``pipeline``: its
        Pipeline, ``record``: its ResponseRecord, ``span``: its response span)."""
        response = pipeline.writer.response
        usage = response.get("usage") or {}
        error = response.get("error") or {}
        model = str(response.get("model") or getattr(pipeline.decision, "model_id", "") or "unknown")
        input_tokens, output_tokens = usage.get("input_tokens"), usage.get("output_tokens")
        if self.metrics is not None:
            self.metrics.queue_waited(max(0.0, pipeline.generation_started - self.started)
                                      if pipeline.generation_started else 0.0)
            self.metrics.finished(status=record.status, dialect=dialect, model=model,
                                  seconds=time.perf_counter() - self.started,
                                  error_code=error.get("code") if isinstance(error, dict) else None,
                                  input_tokens=input_tokens, output_tokens=output_tokens)
        if span is not NO_SPAN:  # tracing off: NO_SPAN records nothing, so nothing is built for it (issue 41)
            span.set_attributes({"gen_ai.response.model": model, "gen_ai.usage.input_tokens": input_tokens,
                                 "gen_ai.usage.output_tokens": output_tokens,
                                 "gen_ai.response.finish_reasons": [record.status],
                                 "respstream.route.category": getattr(pipeline.decision, "category", None)})
            if self.tracing.settings.record_content:
                span.set_attribute("gen_ai.output.messages",
                                   self.tracing.content(str(response.get("output_text", ""))))
            if record.status not in ("completed", "incomplete"):
                span.record_error(error_type=str(error.get("code") if isinstance(error, dict) and error.get("code")
                                                 else record.status))
        obs = self.observation
        if obs is not None:
            obs.model, obs.outcome = model, record.status
            obs.input_tokens, obs.output_tokens = input_tokens, output_tokens


class _NullTelemetry(ResponseTelemetry):
    """For a pipeline built without a service (unit tests): spans are no-ops, nothing is measured."""

    def __init__(self) -> None:
        super().__init__(metrics=None, tracing=Tracing(TelemetrySettings(traces="false")), started=0.0,
                         observation=None)

    def first_token(self) -> None:
        pass

    def span(self, name: str, attributes: dict[str, Any] | None = None) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(NO_SPAN)


NULL_TELEMETRY = _NullTelemetry()
