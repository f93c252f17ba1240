"""Errors before streaming: one envelope, the right status.

Body: ``{"detail": "<message>", "error": {"type", "code", "message", "param"}}`` — the seed platform's ``detail``
plus OpenAI's ``error`` object, so both kinds of client read it. Raise :class:`HTTPError` anywhere in a handler; the
app turns it (and Starlette's own 404/405) into this envelope.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from respstream.server.store.base import StoreUnavailable

__all__ = ["HTTPError", "error_response", "exception_handlers"]

log = logging.getLogger("respstream.server")

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


async def _on_store_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("store unavailable on %s: %s", request.url.path, exc)
    return error_response(HTTPError(503, "store_unavailable", f"The response store is unavailable: {exc}",
                                    headers={"Retry-After": "1"}))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPError)
    return error_response(exc)


async def _on_starlette_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    return error_response(HTTPError(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail),
                                    headers=dict(exc.headers or {})))


async def _on_crash(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s", request.url.path, exc_info=exc)
    return error_response(HTTPError(500, "internal_error", "Internal server error."))


def exception_handlers() -> dict[Any, Any]:
    """The app's handlers: our errors and Starlette's 404/405 as the envelope, a store outage as 503, and anything
    else as a logged 500 without a traceback in the body."""
    return {HTTPError: _on_http_error, StarletteHTTPException: _on_starlette_error,
            StoreUnavailable: _on_store_unavailable, Exception: _on_crash}
