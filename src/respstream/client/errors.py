"""HTTP failures before streaming -> typed exceptions carrying the server's error envelope.

How this works: :func:`status_error` reads one non-2xx answer (status, headers, body bytes) and returns the
:class:`~respstream.errors.APIStatusError` subclass for the status, with ``error_code``, ``error_type``, ``param``,
a human message and the parsed body. It understands every error body we have seen:

* OpenAI: ``{"error": {"message", "type", "param", "code"}}``
* the seed platform: ``{"detail": ..., "error": {...}}`` where ``error`` may also be a bare string
  (``{"detail": "Project membership required", "error": "project_forbidden"}``)
* FastAPI validation: ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``
* flat ``{"code", "message"}`` objects, plain-text bodies (a proxy's ``502 Bad Gateway``) and HTML error pages.

Transport failures (refused connection, DNS, TLS) become :class:`APIConnectionError` with the cause chained.
"""

from __future__ import annotations

import email.utils
import html
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from respstream.errors import APIStatusError, RespstreamError

__all__ = [
    "APIConnectionError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "UnprocessableEntityError",
    "parse_retry_after",
    "status_error",
]


class BadRequestError(APIStatusError):
    """HTTP 400: the request itself is wrong; retrying it unchanged will not help."""

    code = "http.bad_request"


class AuthenticationError(APIStatusError):
    """HTTP 401: missing, wrong or revoked API key."""

    code = "http.unauthorized"


class PermissionDeniedError(APIStatusError):
    """HTTP 403: the key is valid but may not do this."""

    code = "http.forbidden"


class NotFoundError(APIStatusError):
    """HTTP 404: unknown response id, expired background response, or a wrong base URL."""

    code = "http.not_found"


class UnprocessableEntityError(APIStatusError):
    """HTTP 422: the body parsed but failed validation."""

    code = "http.unprocessable"


class RateLimitError(APIStatusError):
    """HTTP 429: too many requests; ``retry_after`` says how long the server asked us to wait."""

    code = "http.rate_limited"


class ServerError(APIStatusError):
    """HTTP 5xx: the server or a proxy in front of it failed."""

    code = "http.server_error"


class APIConnectionError(RespstreamError):
    """The server could not be reached, or the connection broke before an answer. The cause is chained."""

    code = "http.connection"


class APITimeoutError(APIConnectionError):
    """Connecting (or waiting for the status line of a non-streaming call) took longer than the timeout."""

    code = "http.timeout"


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}

_MAX_MESSAGE = 300
# A tag ends at ">" or where the next one opens: "<[^>]+>" retried from every "<" of a page with no ">" (a hostile
# error body) scans the rest of it each time, quadratic.
_TAGS = re.compile(r"<[^<>]+>")
_json = msgspec.json.Decoder()


def status_error(
    status_code: int, headers: Mapping[str, str], body: bytes, *, url: str | None = None
) -> APIStatusError:
    """Build the typed exception for one non-2xx answer. Never raises, whatever the body holds."""
    parsed: Any
    try:
        parsed = _json.decode(body) if body.strip() else None
    except msgspec.DecodeError:
        parsed = None
    code, etype, param, message = _envelope(parsed) if parsed is not None else (None, None, None, None)
    if message is None:
        message = _text_message(body, headers.get("content-type", ""))
    shown_body: Any = parsed if parsed is not None else body.decode("utf-8", "replace")[:2000]
    cls = _BY_STATUS.get(status_code, ServerError if status_code >= 500 else APIStatusError)
    label = f"HTTP {status_code}"
    if code:
        label += f" {code}"
    text = f"{label}: {message}" if message else label
    if url:
        text += f" ({url})"
    return cls(
        text,
        status_code=status_code,
        error_code=code,
        error_type=etype,
        param=param,
        body=shown_body,
        retry_after=parse_retry_after(headers),
    )


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


def _envelope(obj: Any) -> tuple[str | None, str | None, str | None, str | None]:
    """(code, type, param, message) from any JSON error body we know; Nones for what is not there."""
    if not isinstance(obj, dict):
        return None, None, None, _clip(_str(obj)) if obj is not None else None
    code = etype = param = message = None
    err = obj.get("error")
    if isinstance(err, dict):
        code, etype, param, message = (_str(err.get(k)) for k in ("code", "type", "param", "message"))
    elif isinstance(err, str):
        code = err  # the seed platform's bare-string form: the string is a code, the detail is the message
    detail = obj.get("detail")
    if message is None and isinstance(detail, str):
        message = detail
    elif message is None and isinstance(detail, list) and detail and isinstance(detail[0], dict):
        first = detail[0]  # FastAPI-style validation list: name the first offending field
        message = _str(first.get("msg"))
        loc = first.get("loc")
        if param is None and isinstance(loc, list) and loc:
            param = ".".join(str(part) for part in loc if part != "body") or None
    elif message is None and isinstance(detail, dict):
        message = _str(detail.get("message")) or _str(detail)
    if message is None and isinstance(obj.get("message"), str):
        message = obj["message"]  # flat {"code", "message"}
    if code is None and isinstance(obj.get("code"), str | int):
        code = str(obj["code"])
    if etype is None and isinstance(obj.get("type"), str):
        etype = obj["type"]
    if param is None and isinstance(obj.get("param"), str):
        param = obj["param"]
    return code, etype, param, _clip(message)


def _text_message(body: bytes, content_type: str) -> str | None:
    if not body.strip():
        return None
    head = body[:65536]
    if b"<html" in head.lower() or "html" in content_type.lower():
        raw_title = _title(head)
        if raw_title is not None:
            title = html.unescape(raw_title.decode("utf-8", "replace"))
            return _clip(" ".join(title.split()) + " (HTML error page)")
        text = _TAGS.sub(" ", head.decode("utf-8", "replace"))
        return _clip(" ".join(html.unescape(text).split()) + " (HTML error page)")
    return _clip(" ".join(head.decode("utf-8", "replace").split()))


def _title(head: bytes) -> bytes | None:
    """What the first ``<title ...>`` holds up to ``</title>``; found with ``find``, each byte looked at once (a
    regex retried at every ``<title`` of a page without ``>`` is quadratic)."""
    lowered = head.lower()
    start = lowered.find(b"<title")
    end_of_tag = lowered.find(b">", start) if start >= 0 else -1
    close = lowered.find(b"</title>", end_of_tag) if end_of_tag >= 0 else -1
    return head[end_of_tag + 1 : close] if close >= 0 else None


def _clip(message: str | None) -> str | None:
    if message is None:
        return None
    message = message.strip()
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, ``Retry-After`` seconds or an HTTP date.

    Returns ``None`` when absent or unreadable; never negative.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
