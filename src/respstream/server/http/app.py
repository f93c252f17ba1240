"""The Starlette app: ``create_app(config) -> Starlette``. HTTP only; the work lives in the service and pipeline.

Endpoints (DESIGN §4): ``POST /v1/responses``; ``GET /v1/responses/{id}`` (JSON, or the stream resumed after
``starting_after`` / ``Last-Event-ID``; ``204`` when that is at or past the terminal); ``POST .../cancel``;
``DELETE``; ``GET /v1/models``; ``/healthz``; ``/metrics``; ``/openapi.json``; ``/`` (the playground),
``/static`` and ``/favicon.ico``. Every answer carries ``x-request-id``; every error before streaming is the
envelope of http_errors.

The route table only: the handlers live in :mod:`response_routes` (``/v1/responses``), :mod:`info_routes` (models,
health, metrics, OpenAPI, playground), the endpoints folder and :mod:`websocket`; what they share (config, limits,
the service, the guards) is the :class:`~respstream.server.http.app_gateway.AppGateway`. Components (router, tools,
rewriter, store; :mod:`components`) are passed in by tests, or built from the config at startup. Every request first
passes :mod:`request_scope` (request id, span, access log).
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from respstream.server.config import Config
from respstream.server.endpoints.compaction import compact
from respstream.server.endpoints.conversations import conversation_routes
from respstream.server.endpoints.input_items import input_tokens, list_input_items
from respstream.server.http import info_routes, response_routes
from respstream.server.http.app_gateway import AppGateway
from respstream.server.http.components import Components, build_store
from respstream.server.http.request_scope import GatewayApp
from respstream.server.http_errors import exception_handlers
from respstream.server.websocket.transport import serve_websocket

__all__ = ["Components", "GatewayApp", "build_store", "create_app"]


def create_app(config: Config | None = None, components: Components | None = None) -> Starlette:
    """The gateway ASGI app. ``components`` injects a store/router/tools/rewriter (tests); the rest is built."""
    config = config or Config()
    if not config.instance_id:  # `respstream serve` sets a stable one (config.stable_instance_id)
        config.instance_id = uuid.uuid4().hex[:12]
    gw = AppGateway(config, components or Components())
    routes: list[Any] = [
        Route("/v1/responses", functools.partial(response_routes.create, gw), methods=["POST"]),
        WebSocketRoute("/v1/responses", functools.partial(serve_websocket, gw)),
        Route("/v1/responses/compact", functools.partial(compact, gw), methods=["POST"]),
        Route("/v1/responses/input_tokens", functools.partial(input_tokens, gw), methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", functools.partial(list_input_items, gw), methods=["GET"]),
        Route("/v1/responses/{response_id}", functools.partial(response_routes.retrieve, gw), methods=["GET"]),
        Route("/v1/responses/{response_id}", functools.partial(response_routes.delete, gw), methods=["DELETE"]),
        Route("/v1/responses/{response_id}/cancel", functools.partial(response_routes.cancel, gw), methods=["POST"]),
        *conversation_routes(gw),
        Route("/v1/models", functools.partial(info_routes.models, gw), methods=["GET"]),
        Route("/healthz", functools.partial(info_routes.healthz, gw), methods=["GET"]),
        Route("/readyz", functools.partial(info_routes.readyz, gw), methods=["GET"]),
        Route("/metrics", functools.partial(info_routes.metrics_text, gw), methods=["GET"]),
        Route("/openapi.json", functools.partial(info_routes.openapi, gw), methods=["GET"]),
        Route("/", functools.partial(info_routes.index, gw), methods=["GET"]),
        Route("/favicon.ico", functools.partial(info_routes.favicon, gw), methods=["GET"]),
    ]
    static = info_routes.static_dir(config)
    if static.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=static), name="static"))
    app = GatewayApp(
        routes=routes,
        lifespan=gw.lifespan,
        exception_handlers=exception_handlers(),
    )
    app.state.gateway = gw
    app.metrics = gw.metrics
    app.tracing = gw.tracing
    return app
