"""Errors before streaming: one envelope, the right status.

Body: ``{"detail": "<message>", "error": {"type", "code", "message", "param"}}`` — the seed platform's ``detail``
plus OpenAI's ``error`` object, so both kinds of client read it. Raise :class:`HTTPError` anywhere in a handler; the
app turns it (and Starlette's own 404/405) into this envelope.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

__all__ = ["HTTPError", "error_response"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class HTTPError(Exception):
    """A request that ends before streaming with ``status`` and an error envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.headers = headers or {}
        self.extra = extra or {}


def envelope(status: int, code: str, message: str, param: str | None = None, **extra: Any) -> dict[str, Any]:
    error = {"type": _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
             "code": code, "message": message, "param": param, **extra}
    return {"detail": message, "error": error}


def error_response(exc: HTTPError) -> JSONResponse:
    body = envelope(exc.status, exc.code, exc.message, exc.param, **exc.extra)
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)
