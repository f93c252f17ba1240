"""The ``[telemetry]`` and ``[logging]`` config tables, validated (an unknown key is an error naming it)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["LoggingSettings", "TelemetrySettings"]

_LEVELS = {"debug", "info", "warning", "error", "critical"}


def _check_keys(table: str, given: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"[{table}]: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """``traces``: ``auto`` exports spans when an OTLP endpoint is configured here or in ``OTEL_EXPORTER_OTLP_*``;
    ``true`` always (default endpoint http://localhost:4318); ``false`` never. ``record_content`` puts prompt and
    answer text on spans (off: never recorded). ``trace_sample_ratio``: the share of new traces recorded (a
client's sampled ``traceparent`` is always followed); ``OTEL_TRACES_SAMPLER`` overrides it. ``metrics`` turns the
    Prometheus instruments off when false."""

    traces: str = "auto"
    otlp_endpoint: str = ""  # the base URL; spans go to <endpoint>/v1/traces (OTLP/HTTP, protobuf)
    service_name: str = "respstream"
    record_content: bool = False
    max_content_chars: int = 4096
    export_timeout_seconds: float = 5.0
    trace_sample_ratio: float = 1.0  # share of traces recorded (parent-based); OTEL_TRACES_SAMPLER wins
    metrics: bool = True
    metrics_key_required: bool = True  # with API keys configured, /metrics needs one too

    @classmethod
    def from_mapping(cls, given: dict[str, Any]) -> TelemetrySettings:
        _check_keys("telemetry", given, {f.name for f in fields(cls)})
        settings = cls(**given)
        if settings.traces not in ("auto", "true", "false"):
            raise ValueError(f"[telemetry] traces must be auto, true or false, not {settings.traces!r}")
        if not isinstance(settings.trace_sample_ratio, (int, float)) or not 0.0 <= settings.trace_sample_ratio <= 1.0:
            raise ValueError(f"[telemetry] trace_sample_ratio must be a number from 0 to 1, "
                             f"not {settings.trace_sample_ratio!r}")
        if settings.max_content_chars < 0 or settings.export_timeout_seconds <= 0:
            raise ValueError("[telemetry] max_content_chars must be >= 0 and export_timeout_seconds > 0")
        return settings

    def traces_endpoint(self) -> str | None:
        """Where spans go, or None when tracing is off. The OTEL_* variables win over the config, as the spec says."""
        if self.traces == "false" or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
            return None
        if os.environ.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
            return None
        explicit = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if explicit:
            return explicit
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or self.otlp_endpoint
        if not base:
            return "http://localhost:4318/v1/traces" if self.traces == "true" else None
        return base.rstrip("/") + "/v1/traces"


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    """``format``: ``auto`` (text on a terminal, JSON lines otherwise), ``json`` or ``text``. ``access_log``: one
    line per request on the ``respstream.access`` logger. ``levels``: a level per logger name."""

    level: str = "warning"
    format: str = "auto"
    access_log: bool = True
    levels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, given: dict[str, Any]) -> LoggingSettings:
        _check_keys("logging", given, {f.name for f in fields(cls)})
        settings = cls(**given)
        if settings.format not in ("auto", "json", "text"):
            raise ValueError(f"[logging] format must be auto, json or text, not {settings.format!r}")
        for name, level in {"level": settings.level, **{f"levels.{k}": v for k, v in settings.levels.items()}}.items():
            if not isinstance(level, str) or level.lower() not in _LEVELS:
                raise ValueError(f"[logging] {name} must be one of {', '.join(sorted(_LEVELS))}, not {level!r}")
        return settings
