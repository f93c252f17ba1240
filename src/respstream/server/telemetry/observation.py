"""What one request and one upstream attempt learn about themselves, carried in context variables.

The app sets a :class:`RequestObservation` for each HTTP request; the service and pipeline fill in the response
id, model, first-token time and tokens as they learn them (the generation task inherits the same object), and the
access log line is written from it when the request ends. An :class:`UpstreamAttempt` is current while the
pipeline streams from one upstream, so an upstream adapter can report its queue and connect phases with
:func:`mark_upstream_phase` without knowing about metrics or spans.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestObservation", "UpstreamAttempt", "current_attempt", "current_request", "mark_upstream_phase"]


@dataclass(slots=True)
class RequestObservation:
    request_id: str
    method: str
    path: str
    client: str | None
    started: float = field(default_factory=time.perf_counter)
    route: str = "unmatched"
    status: int | None = None
    key_id: str | None = None
    response_id: str | None = None
    model: str | None = None
    dialect: str | None = None
    outcome: str | None = None  # the response's final status, when it ended within this request
    first_token_seconds: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class UpstreamAttempt:
    upstream: str
    metrics: Any  # respstream.server.telemetry.metrics.Metrics, or None
    span: Any
    started: float = field(default_factory=time.perf_counter)
    last_mark: float = 0.0

    def mark(self, phase: str) -> None:
        """Record ``phase`` as the time since the previous mark (or the attempt's start)."""
        now = time.perf_counter()
        seconds = now - (self.last_mark or self.started)
        self.last_mark = now
        if self.metrics is not None:
            self.metrics.upstream_phase(self.upstream, phase, seconds)
        self.span.set_attribute(f"respstream.upstream.{phase}_ms", round(seconds * 1000, 3))


_request: ContextVar[RequestObservation | None] = ContextVar("respstream_request", default=None)
_attempt: ContextVar[UpstreamAttempt | None] = ContextVar("respstream_upstream_attempt", default=None)


def current_request() -> RequestObservation | None:
    return _request.get()


def current_attempt() -> UpstreamAttempt | None:
    return _attempt.get()


def mark_upstream_phase(phase: str) -> None:
    """Called by upstream adapters: ``queue`` once a concurrency slot is held, ``connect`` once headers arrived."""
    attempt = _attempt.get()
    if attempt is not None:
        attempt.mark(phase)


def set_request(observation: RequestObservation | None) -> Any:
    return _request.set(observation)


def reset_request(token: Any) -> None:
    _request.reset(token)


def set_attempt(attempt: UpstreamAttempt | None) -> Any:
    return _attempt.set(attempt)


def reset_attempt(token: Any) -> None:
    _attempt.reset(token)
