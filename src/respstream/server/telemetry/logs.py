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

__all__ = ["ACCESS_LOGGER", "JsonFormatter", "TextFormatter", "access_fields", "configure_logging", "escape_controls",
           "log_access"]

ACCESS_LOGGER = "respstream.access"
access_log = logging.getLogger(ACCESS_LOGGER)
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_encode = msgspec.json.Encoder().encode
_FIELDS = "_respstream_fields"
_tree = logging.getLogger("respstream")
_json_handler: logging.StreamHandler[Any] | None = None  # set by configure_logging() when it writes JSON lines


_last_second: tuple[int, str] = (-1, "")  # the last whole second and its text (one tuple: swapped whole)


def _timestamp(record: logging.LogRecord) -> str:
    return _utc_text(record.created)


def _utc_text(created: float) -> str:
    """``2026-12-01T18:28:58.123Z`` (milliseconds truncated, as ``LogRecord.msecs``); the date and time up to the
    second formatted once a second."""
    global _last_second
    whole = int(created)
    cached = _last_second
    if cached[0] != whole:
        cached = _last_second = (whole, _dt.datetime.fromtimestamp(whole, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{cached[1]}.{int((created - whole) * 1000):03d}Z"


def _extra(record: logging.LogRecord) -> dict[str, Any]:
    fields = record.__dict__.get(_FIELDS)
    if fields is not None:  # an access line: its extra fields are known
        return fields  # type: ignore[no-any-return]
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


# Control characters (C0, DEL, C1) and Unicode line/paragraph separators, as \n, \x1b, \u2028: a request path
# decoded from %0A or %1B must not start a forged line or drive the terminal.
_CONTROLS = {c: repr(chr(c))[1:-1] for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)}
_CONTROLS[ord("\\")] = "\\\\"  # so an escaped sequence cannot be faked by sending its text


def escape_controls(text: str) -> str:
    r"""``text`` with every control character written as its escape (``\n``, ``\x1b``), and ``\`` doubled."""
    if text.isprintable() and "\\" not in text:
        return text
    return text.translate(_CONTROLS)


class TextFormatter(logging.Formatter):
    """``HH:MM:SS level logger: message key=value ...`` for a person at a terminal. The message and every value are
    written with control characters escaped (:func:`escape_controls`), so a logged value is always one line."""

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        extra = " ".join(f"{k}={escape_controls(str(v))}" for k, v in _extra(record).items() if v is not None)
        line = f"{clock} {record.levelname.lower():7} {record.name}: {escape_controls(record.getMessage())}"
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
    global _json_handler
    _json_handler = handler if use_json else None
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


def _only_destination() -> logging.StreamHandler[Any] | None:
    """The JSON-lines handler :func:`configure_logging` installed, when an access line can go nowhere else and
    nothing may filter it; else None (then the line goes through ``logging`` as usual)."""
    handler = _json_handler
    parent = _tree
    if (handler is None or access_log.handlers or access_log.filters or not access_log.propagate
            or access_log.disabled or len(parent.handlers) != 1 or parent.handlers[0] is not handler
            or parent.filters or parent.propagate or handler.filters or handler.level > logging.INFO):
        return None
    return handler


def log_access(obs: RequestObservation) -> None:
    if access_log.isEnabledFor(logging.INFO):
        fields = access_fields(obs)
        handler = _only_destination()
        if handler is not None:
            # What JsonFormatter writes for this record, without building the LogRecord (a line per request).
            created = time.time()
            message = "%s %s %s %.1f ms" % (obs.method, obs.path, obs.status, fields["duration_ms"])  # noqa: UP031
            line = _encode({"ts": _utc_text(created), "level": "info", "logger": ACCESS_LOGGER,
                            "message": message, **fields}).decode() + handler.terminator
            with handler.lock:  # type: ignore[union-attr]
                try:
                    handler.stream.write(line)
                    handler.flush()
                except Exception:  # as StreamHandler.emit: logging never breaks the request
                    handler.handleError(logging.makeLogRecord({"msg": message, "name": ACCESS_LOGGER}))
            return
        # Logger.info without its caller lookup (a walk up the stack per line; the caller is always this line).
        record = access_log.makeRecord(ACCESS_LOGGER, logging.INFO, __file__, 0, "%s %s %s %.1f ms",
                                       (obs.method, obs.path, obs.status, fields["duration_ms"]), None,
                                       func="log_access", extra=fields)
        record.__dict__[_FIELDS] = fields
        access_log.handle(record)
