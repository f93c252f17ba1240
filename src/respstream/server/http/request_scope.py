"""The ASGI layer every HTTP request passes first: its request id, its observation, its server span, the
open-gateway Host/Origin policy, and its access-log line and request metrics when it ends."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from respstream.server.http.web_security import COMMON_HEADERS, PLAYGROUND_HEADERS, check_open_request
from respstream.server.http_errors import HTTPError, error_response
from respstream.server.telemetry import RequestObservation, Tracing, log_access
from respstream.server.telemetry.metrics import Metrics
from respstream.server.telemetry.observation import reset_request, set_request
from respstream.server.telemetry.spans import NO_SPAN_CM

__all__ = ["GatewayApp"]


class GatewayApp(Starlette):
    """Starlette, plus an ``x-request-id`` on every response (the caller's, if it sent a sane one).

    Done here, outside Starlette's middleware stack, so the SSE sender can write body frames straight to the
    server's ``send`` (``scope["state"]["raw_send"]``) after the start message went through the whole stack: the
    per-event wrappers of four middleware layers would cost more than the event itself.
    """

    metrics: Metrics
    tracing: Tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # the WebSocket sender writes ready events together through it
                scope.setdefault("state", {})["raw_send"] = send
            await super().__call__(scope, receive, send)
            return
        headers = dict(scope["headers"])
        given = headers.get(b"x-request-id", b"")
        sane = 0 < len(given) <= 128 and given.isascii() and b"\n" not in given
        rid = given if sane else os.urandom(16).hex().encode()
        state = scope.setdefault("state", {})
        state["request_id"] = rid.decode()
        state["raw_send"] = send
        client = scope.get("client")
        obs = RequestObservation(request_id=state["request_id"], method=scope["method"], path=scope["path"],
                                 client=client[0] if client else None)
        token = set_request(obs)

        path: str = scope.get("path", "")
        extra = [*COMMON_HEADERS, *(PLAYGROUND_HEADERS if path == "/" or path.startswith("/static/") else [])]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid), *extra]
                obs.route = getattr(scope.get("route"), "path", "unmatched")
                obs.status = message["status"]
            await send(message)

        traced = self.tracing.enabled  # off: no span name or attributes built for nothing (issue 41)
        span_cm: AbstractContextManager[Any] = NO_SPAN_CM
        if traced:
            parent = {"traceparent": headers[b"traceparent"].decode("latin-1")} if b"traceparent" in headers else None
            span_cm = self.tracing.span(f"{scope['method']} {scope['path']}", {
                "http.request.method": scope["method"], "url.path": scope["path"], "respstream.request_id":
                state["request_id"], "client.address": obs.client}, kind="server", parent_headers=parent)
        try:
            with span_cm as span:
                gateway = getattr(self.state, "gateway", None)
                refused: HTTPError | None = None
                if gateway is not None and not gateway.keys.enabled:
                    try:
                        check_open_request(scope["method"], scope.get("scheme", "http"), headers)
                    except HTTPError as exc:
                        refused = exc
                if refused is not None:
                    await error_response(refused)(scope, receive, send_with_id)
                else:
                    await super().__call__(scope, receive, send_with_id)
                if traced:
                    span.update_name(f"{scope['method']} {obs.route}")
                    span.set_attributes({"http.route": obs.route, "http.response.status_code": obs.status,
                                         "gen_ai.response.id": obs.response_id})
                    if obs.status is not None and obs.status >= 500:
                        span.record_error(error_type=str(obs.status))
        finally:
            reset_request(token)
            self.metrics.request(obs.method, obs.route, obs.status or 500)
            log_access(obs)
