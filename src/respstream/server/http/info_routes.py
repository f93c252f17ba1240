"""The routes beside the Responses API: ``GET /v1/models``, ``/healthz`` (liveness), ``/readyz`` (readiness),
``/metrics``, ``/openapi.json``, and the playground (``/`` and ``/favicon.ico``; ``/static`` is mounted by the app).

Each handler takes the :class:`~respstream.server.http.app_gateway.AppGateway` first (``functools.partial`` in the
route table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response

from respstream.server.config import Config
from respstream.server.http.app_gateway import AppGateway
from respstream.server.http.openapi import openapi_document
from respstream.server.http_errors import HTTPError
from respstream.server.telemetry.metrics import CONTENT_TYPE

__all__ = ["STATIC_DIR", "favicon", "healthz", "index", "metrics_text", "models", "openapi", "readyz", "static_dir"]

STATIC_DIR = Path(__file__).parent.parent / "static"  # server/static, beside the folders


async def models(gw: AppGateway, request: Request) -> Response:
    gw.authenticate(request)
    router: Any = gw.svc.router
    upstreams = list(gw.components.upstreams if gw.components else [])
    upstreams = [u for u in upstreams or getattr(router, "upstreams", []) if hasattr(u, "models")]
    served = [(m, next((u for u in upstreams if m in getattr(u, "models", ())), None)) for m in router.models()]
    health = gw.health.known()
    served_by: dict[str, list[dict[str, Any]]] = {}
    for upstream in upstreams:
        for model in getattr(upstream, "models", []):
            served_by.setdefault(model, []).append(
                {"name": upstream.name, "healthy": health.get(upstream.name, {}).get("healthy", True)})
    served_by["auto"] = [{"name": u.name, "healthy": health.get(u.name, {}).get("healthy", True)}
                         for u in upstreams]
    data = gw.svc.catalog.listing(served)  # every model and alias with its input_modalities
    for entry in data:
        found = served_by.get(entry.get("alias_for", entry["id"]))
        if found is not None:
            entry["upstreams"] = found
    return JSONResponse({"object": "list", "data": data})


async def healthz(gw: AppGateway, request: Request) -> Response:
    """Liveness: the process answers. Readiness (store and upstreams) is /readyz."""
    ready = gw.service is not None
    return JSONResponse({"status": "ok" if ready else "starting", "dialect": gw.config.dialect,
                         "instance_id": gw.config.instance_id, "running": len(gw.svc.running) if ready else 0},
                        status_code=200 if ready else 503)


async def readyz(gw: AppGateway, request: Request) -> Response:
    """Readiness: the store answers and at least one upstream is healthy; 503 otherwise. The breakdown (store,
    upstreams with their addresses and errors) only for a valid API key, or on an open (loopback) gateway."""
    if gw.service is None or gw.components is None:
        return JSONResponse({"status": "starting"}, status_code=503, headers={"Retry-After": "1"})
    report = await gw.health.check(gw.svc.store, gw.components.upstreams, gw.svc.router)
    if gw.keys.enabled and not _has_valid_key(gw, request):
        # Upstream addresses and their errors are for a key holder: a balancer needs only the status.
        report = {"status": report["status"]}
    return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503,
                        headers={"Cache-Control": "no-store"})


def _has_valid_key(gw: AppGateway, request: Request) -> bool:
    """Whether the request carries a valid API key (wrong keys count against auth_failures as anywhere)."""
    try:
        gw.authenticate(request)
    except HTTPError:
        return False
    return True


async def metrics_text(gw: AppGateway, request: Request) -> Response:
    if gw.metrics_key_required:
        gw.authenticate(request)  # with API keys configured, the metrics are not public either
    if gw.service is not None:
        gw.metrics.set_running(len(gw.service.running))
    return Response(gw.metrics.render(), media_type=CONTENT_TYPE)


async def openapi(gw: AppGateway, request: Request) -> Response:
    return JSONResponse(openapi_document(gw.config.dialect))


async def index(gw: AppGateway, request: Request) -> Response:
    page = static_dir(gw.config) / "index.html"
    if page.is_file():
        return FileResponse(page, headers={"Cache-Control": "no-store"})
    return PlainTextResponse("The playground is not installed (server/static/index.html is missing).\n",
                             status_code=404)


async def favicon(gw: AppGateway, request: Request) -> Response:
    icon = static_dir(gw.config) / "favicon.ico"
    if icon.is_file():
        return FileResponse(icon, media_type="image/x-icon", headers={"Cache-Control": "max-age=86400"})
    return PlainTextResponse("no favicon\n", status_code=404)


def static_dir(config: Config) -> Path:
    return Path(config.static_dir) if config.static_dir else STATIC_DIR
