"""SSE framing of log entries, and the terminal a reader gets when its stream cannot go on.

Why a module of its own: the writer makes log entries, the transports (SSE in ``sse_response.py``, WebSocket in
``websocket.py``) put them on the wire; both sides share only this: the bytes of one entry in a dialect, the error
codes a stream can end with, and what a terminal entry says about the response.

Frames: ``id: <seq>\nevent: message|<type>\ndata: <json>\n\n`` (Open Responses: no ``id:`` line, and
``data: [DONE]`` right after the terminal). A compact delta entry is formatted in one step from its part's template.
"""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.server.events.dialects import Dialect
from respstream.server.store.base import DeltaEntry, Entry, LogEntry
from respstream.server.store.error_event import ERROR_CODES, flat_error

_encode = msgspec.json.Encoder().encode

__all__ = ["ERROR_CODES", "flat_error", "frame", "frames", "reader_terminal_data", "reader_terminal_frame",
           "terminal_outcome"]

_DONE = b"data: [DONE]\n\n"


def frame(dialect: Dialect, entry: Entry) -> bytes:
    """The SSE frame for one log entry in ``dialect`` (one formatting step for a compact delta). Open Responses:
    no ``id:`` line, and ``data: [DONE]`` right after the terminal."""
    if entry.__class__ is DeltaEntry:
        seq, template = entry.sequence_number, entry.template  # type: ignore[union-attr]
        if not dialect.id_lines:
            return template.frame_bare % (seq, entry.piece)  # type: ignore[union-attr,no-any-return]
        fmt = template.frame_typed if dialect.event_line_is_type else template.frame_message
        return fmt % (seq, seq, entry.piece)  # type: ignore[union-attr,no-any-return]
    name = entry.type.encode() if dialect.event_line_is_type else b"message"
    if dialect.id_lines:
        return b"id: %d\nevent: %b\ndata: %b\n\n" % (entry.sequence_number, name, entry.data)
    body = b"event: %b\ndata: %b\n\n" % (name, entry.data)
    return body + _DONE if entry.terminal and dialect.done_sentinel else body


def frames(dialect: Dialect, entries: list[Entry]) -> list[bytes]:
    """:func:`frame` of each entry, in one call (the formatting inlined for a run of compact deltas)."""
    out: list[bytes] = []
    append = out.append
    if not dialect.id_lines:
        for entry in entries:
            if entry.__class__ is DeltaEntry:
                append(entry.template.frame_bare % (entry.sequence_number, entry.piece))  # type: ignore[union-attr]
            else:
                append(frame(dialect, entry))
        return out
    typed = dialect.event_line_is_type
    for entry in entries:
        if entry.__class__ is DeltaEntry:
            template, seq = entry.template, entry.sequence_number  # type: ignore[union-attr]
            append((template.frame_typed if typed else template.frame_message) % (seq, seq, entry.piece))  # type: ignore[union-attr]
        else:
            append(frame(dialect, entry))
    return out


def reader_terminal_data(dialect: Dialect, sequence_number: int, code: str, message: str) -> bytes:
    """The JSON of :func:`reader_terminal_frame` (what a WebSocket sends as its message)."""
    if dialect.separate_terminal_types:
        err = {"type": ERROR_CODES.get(code, "server_error"), "code": code, "message": message, "param": None}
        return _encode({"type": "error", "sequence_number": sequence_number, "error": err})
    return _encode({"type": "error", "sequence_number": sequence_number, **flat_error(code, message)})


def reader_terminal_frame(dialect: Dialect, sequence_number: int, code: str, message: str) -> bytes:
    """A terminal ``error`` frame for ONE reader whose stream cannot go on (the store failed, or the response was
    deleted before its terminal reached this reader). It is not in the log, so it has no ``id:`` line: an
    EventSource reconnect resumes from the last real event. Numbered ``last sent + 1`` so the sequence stays whole."""
    if dialect.separate_terminal_types:
        err = {"type": ERROR_CODES.get(code, "server_error"), "code": code, "message": message, "param": None}
        data = _encode({"type": "error", "sequence_number": sequence_number, "error": err})
    else:
        data = _encode({"type": "error", "sequence_number": sequence_number, **flat_error(code, message)})
    name = b"error" if dialect.event_line_is_type else b"message"
    body = b"event: %b\ndata: %b\n\n" % (name, data)
    return body + _DONE if dialect.done_sentinel else body


def terminal_outcome(entry: LogEntry) -> tuple[str, dict[str, Any] | None]:
    """``(record status, error)`` that a terminal log entry stands for (any dialect)."""
    data = msgspec.json.decode(entry.data)
    if entry.type == "error":
        err = data.get("error") if isinstance(data.get("error"), dict) else data
        code, message = err.get("code"), err.get("message")
        return ("cancelled" if code == "cancelled" else "failed"), {"code": code, "message": message}
    response = data.get("response") or {}
    return str(response.get("status") or "failed"), response.get("error")
