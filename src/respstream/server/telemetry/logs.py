"""Structured logs: one access line per request, JSON lines off a terminal, readable text on one.

The access line never carries the API key (only its id from the keys file), nor prompt or answer text.
"""

from __future__ import annotations

import datetime as _dt
import logging
import sys
import time
from typing import Any, TextIO

import msgspec

from respstream.server.telemetry.observation import RequestObservation
from respstream.server.telemetry.settings import LoggingSettings

__all__ = ["ACCESS_LOGGER", "JsonFormatter", "TextFormatter", "access_fields", "configure_logging", "log_access"]

ACCESS_LOGGER = "respstream.access"
access_log = logging.getLogger(ACCESS_LOGGER)
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_encode = msgspec.json.Encoder().encode


def _timestamp(record: logging.LogRecord) -> str:
    return _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _extra(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``message``, then the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"ts": _timestamp(record), "level": record.levelname.lower(), "logger": record.name,
                                 "message": record.getMessage()}
        entry.update(_extra(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _encode(entry).decode()


class TextFormatter(logging.Formatter):
    """``HH:MM:SS level logger: message key=value ...`` for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        extra = " ".join(f"{k}={v}" for k, v in _extra(record).items() if v is not None)
        line = f"{clock} {record.levelname.lower():7} {record.name}: {record.getMessage()}"
        if extra:
            line += "  " + extra
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(settings: LoggingSettings, *, stream: TextIO | None = None) -> logging.Handler:
    """Install one handler on the ``respstream`` logger tree (uvicorn's own loggers keep theirs)."""
    out = stream or sys.stderr
    use_json = settings.format == "json" or (settings.format == "auto" and not out.isatty())
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    root = logging.getLogger("respstream")
    for old in [h for h in root.handlers if getattr(h, "_respstream", False)]:
        root.removeHandler(old)
    handler._respstream = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.propagate = False
    root.setLevel(settings.level.upper())
    access_log.setLevel("INFO" if settings.access_log else "WARNING")
    for name, level in settings.levels.items():
        logging.getLogger(name).setLevel(level.upper())
    return handler


def access_fields(obs: RequestObservation) -> dict[str, Any]:
    duration_ms = round((time.perf_counter() - obs.started) * 1000, 3)
    return {
        "request_id": obs.request_id, "method": obs.method, "path": obs.path, "route": obs.route,
        "status": obs.status, "duration_ms": duration_ms, "client": obs.client, "key_id": obs.key_id,
        "response_id": obs.response_id, "model": obs.model, "dialect": obs.dialect, "outcome": obs.outcome,
        "ttft_ms": None if obs.first_token_seconds is None else round(obs.first_token_seconds * 1000, 3),
        "input_tokens": obs.input_tokens, "output_tokens": obs.output_tokens,
    }


def log_access(obs: RequestObservation) -> None:
    if access_log.isEnabledFor(logging.INFO):
        fields = access_fields(obs)
        access_log.info("%s %s %s %.1f ms", obs.method, obs.path, obs.status, fields["duration_ms"], extra=fields)
