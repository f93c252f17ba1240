"""The Starlette app: ``create_app(config) -> Starlette``. HTTP only; the work lives in the service and pipeline.

Endpoints (DESIGN §4): ``POST /v1/responses``; ``GET /v1/responses/{id}`` (JSON, or the stream resumed after
``starting_after`` / ``Last-Event-ID``; ``204`` when that is at or past the terminal); ``POST .../cancel``;
``DELETE``; ``GET /v1/models``; ``/healthz``; ``/metrics``; ``/openapi.json``; ``/`` (the playground),
``/static`` and ``/favicon.ico``. Every answer carries ``x-request-id``; every error before streaming is the
envelope of http_errors.

Components (router, tools, rewriter, store; :mod:`components`) are passed in by tests, or built from the config at
startup. Every request first passes :mod:`request_scope` (request id, span, access log).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from respstream.server import request_limits
from respstream.server.config import Config
from respstream.server.endpoints.compaction import compact
from respstream.server.endpoints.conversations import conversation_routes
from respstream.server.endpoints.input_items import input_tokens, list_input_items
from respstream.server.http.auth import KeyStore
from respstream.server.http.body_encoding import decoded_body
from respstream.server.http.components import Components, build_components, build_store
from respstream.server.http.limits import RateLimiter, StreamGate
from respstream.server.http.openapi import openapi_document
from respstream.server.http.request_scope import GatewayApp
from respstream.server.http.sse_response import EventStreamResponse
from respstream.server.http.websocket import serve_websocket
from respstream.server.http.websocket_limits import WebSocketBudgets
from respstream.server.http_errors import HTTPError, exception_handlers
from respstream.server.inputs.requests import parse_request
from respstream.server.responses.responses_service import TERMINAL_STATUSES, ResponseService
from respstream.server.routing.affinity import affinity_key
from respstream.server.routing.upstream_watch import UpstreamWatch, startup_warnings
from respstream.server.store.base import Store
from respstream.server.store.memory import MemoryStore
from respstream.server.store.split import backend_of
from respstream.server.telemetry import Tracing, current_request
from respstream.server.telemetry.health import HealthMonitor
from respstream.server.telemetry.metrics import CONTENT_TYPE, Metrics, NoMetrics

if TYPE_CHECKING:
    from respstream.server.http.shared_limits import SharedLimits

__all__ = ["Components", "GatewayApp", "build_store", "create_app"]

log = logging.getLogger("respstream.server")
STATIC_DIR = Path(__file__).parent.parent / "static"  # server/static, beside the folders


class _Gateway:
    """The handlers, sharing config, limits and the service."""

    def __init__(self, config: Config, given: Components) -> None:
        self.config = config
        self.given = given
        request_limits.install(config.work_limits())
        telemetry = config.telemetry_settings()
        self.metrics: Metrics = Metrics() if telemetry.metrics else NoMetrics()
        self.tracing = Tracing(telemetry)
        self.metrics_key_required = telemetry.metrics_key_required
        self.health = HealthMonitor(self.metrics)
        self.on_ready: Callable[[dict[str, Any]], None] | None = None
        self.keys = KeyStore(config.resolved_keys_file())
        self.rate = RateLimiter(config.rate_limit_per_minute, config.rate_limit_burst)
        self.auth_failures = RateLimiter(config.auth_failures_per_minute, config.auth_failures_burst)
        self.gate = StreamGate(config.max_concurrent_streams)
        self.websocket_budgets = WebSocketBudgets.from_config(config)  # shared by every WebSocket connection
        self.shared: SharedLimits | None = None
        if config.shared_limits_url() and (config.rate_limit_per_minute > 0 or config.shared_max_concurrent_streams):
            from respstream.server.http.shared_limits import SharedLimits

            self.shared = SharedLimits(config.shared_limits_url(), instance_id=config.instance_id,
                                       per_minute=config.rate_limit_per_minute, burst=config.rate_limit_burst,
                                       max_streams=config.shared_max_concurrent_streams,
                                       lease_seconds=config.lease_seconds)
        self.service: ResponseService | None = None
        self.components: Components | None = None
        self._expire_task: asyncio.Task[None] | None = None
        self.watch: UpstreamWatch | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        comps = await build_components(self.config, self.given)
        assert comps.store is not None and comps.router is not None
        assert comps.tools is not None and comps.rewriter is not None
        self.components = comps
        with contextlib.suppress(Exception):
            await comps.store.recover(self.config.instance_id)
        with contextlib.suppress(Exception):  # end what died with an earlier instance, drop what is past retention
            await comps.store.expire()
        self.service = ResponseService(config=self.config, store=comps.store, router=comps.router,
                                       tools=comps.tools, rewriter=comps.rewriter, metrics=self.metrics,
                                       tracing=self.tracing)
        self._expire_task = asyncio.create_task(self._expire_loop(comps.store))
        memory = comps.store if isinstance(comps.store, MemoryStore) else getattr(comps.store, "memory", None)
        if isinstance(memory, MemoryStore):  # WebSocket stores and this one share memory_store_max_bytes
            self.websocket_budgets.store.outside = lambda: memory.bytes
        self.watch = UpstreamWatch(self.health, comps.store, comps.upstreams, comps.router,
                                   self.config.upstream_probe_seconds)
        self.service.upstream_state = self.watch.state
        await self._report_readiness()
        self.watch.start()
        try:
            yield
        finally:
            self._expire_task.cancel()
            await self.watch.stop()
            await self.service.shutdown()
            for upstream in comps.upstreams:
                with contextlib.suppress(Exception):
                    await upstream.aclose()
            if self.given.store is None:
                await comps.store.aclose()
            if self.shared is not None:
                with contextlib.suppress(Exception):
                    await self.shared.aclose()
            self.tracing.shutdown()

    async def _report_readiness(self) -> None:
        """Probe the store and upstreams once at startup: log what is down, and tell ``on_ready`` (the banner)."""
        assert self.service is not None and self.components is not None
        try:
            report = await self.health.check(self.service.store, self.components.upstreams, self.service.router)
        except Exception as exc:  # readiness reporting must never keep the gateway from starting
            log.warning("startup health check failed: %s", exc)
            return
        for line in startup_warnings(report, self.components.upstreams, self.config.upstream_probe_seconds):
            log.warning("%s", line)
        if not report["store"]["healthy"]:
            log.warning("the store is not reachable: %s", report["store"]["detail"])
        if self.on_ready is not None:
            self.on_ready(report)

    async def drain(self) -> None:
        """The shutdown signal arrived (see serving.GatewayServer): end running responses with ``server_shutdown``
        (foreground at once, background after ``shutdown_grace_seconds``) while their streams are still open."""
        if self.service is not None:
            await self.service.shutdown()

    async def _expire_loop(self, store: Store) -> None:
        # Every minute, or more often for a short retention/lease (lost logs nobody reads are ended here).
        interval = min(60.0, max(0.2, min(self.config.retention_seconds, self.config.lease_seconds) / 4))
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await store.expire()

    @property
    def svc(self) -> ResponseService:
        if self.service is None:
            raise HTTPError(503, "starting", "The server is starting.", headers={"Retry-After": "1"})
        return self.service

    # -- guards ----------------------------------------------------------------------------------------------------
    def authenticate(self, request: HTTPConnection) -> str | None:
        """The caller's owner id (hash of its key), or None on an open server. Raises 401."""
        if not self.keys.enabled:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPError(401, "missing_api_key", "Missing API key: send 'Authorization: Bearer <key>'.",
                            headers={"WWW-Authenticate": "Bearer"})
        owner = self.keys.verify(token.strip())
        if owner is None:
            # Wrong keys are limited per peer address (never a forwarded header: see trusted_proxies), so keys
            # cannot be guessed at line rate.
            wait = self.auth_failures.check(request.client.host if request.client else "anonymous")
            if wait is not None:
                seconds = max(1, int(wait + 0.999))
                raise HTTPError(429, "too_many_failed_auth",
                                f"Too many invalid API keys from this address; retry in {seconds} s.",
                                headers={"Retry-After": str(seconds)})
            raise HTTPError(401, "invalid_api_key", "Invalid or revoked API key.",
                            headers={"WWW-Authenticate": "Bearer"})
        obs = current_request()
        if obs is not None:
            obs.key_id = self.keys.key_id(owner)
        return owner

    async def limit_rate(self, request: HTTPConnection, owner: str | None) -> None:
        key = owner or (request.client.host if request.client else "anonymous")
        wait = self.rate.check(key) if self.shared is None else await self.shared.check_rate(key)
        if wait is not None:
            seconds = max(1, int(wait + 0.999))
            raise HTTPError(429, "rate_limited", f"Rate limit exceeded; retry in {seconds} s.",
                            headers={"Retry-After": str(seconds)})

    async def read_json(self, request: Request) -> Any:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype and ctype != "application/json" and not ctype.endswith("+json"):
            raise HTTPError(415, "unsupported_media_type",
                            f"Content-Type must be application/json, not {ctype!r}.")
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HTTPError(413, "request_too_large", f"The request body is larger than {limit} bytes.")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPError(413, "request_too_large", f"The request body is larger than {limit} bytes.")
            chunks.append(chunk)
        # zstd/gzip/deflate bodies (Codex sends zstd): inflated in bounded steps, capped at the same limit
        body = await decoded_body(request.headers.get("content-encoding"), b"".join(chunks), limit)
        if not body.strip():
            raise HTTPError(400, "invalid_json", "The request body is empty; send a JSON object.")
        try:
            return msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise HTTPError(400, "invalid_json", f"The request body is not valid JSON: {exc}") from None
        except UnicodeDecodeError:
            raise HTTPError(400, "invalid_json", f"The request body is not valid UTF-8 (at byte {_bad_utf8_at(body)})."
                            ) from None
        except RecursionError:  # body_values.check_depth bounds what decodes; this is what does not even decode
            raise HTTPError(400, "invalid_json", "The request body nests arrays/objects too deeply.") from None

    async def _stream_response(self, rid: str, after: int, *, foreground: bool,
                               headers: list[tuple[bytes, bytes]] | None = None,
                               forget: bool = False) -> EventStreamResponse:
        svc = self.svc
        shared = self.shared
        if shared is not None and not await shared.enter_stream():
            raise HTTPError(503, "too_many_streams", "Too many open streams across the gateway's instances; retry "
                            "shortly.", headers={"Retry-After": "1"})
        if not self.gate.try_enter():
            if shared is not None:
                shared.leave_stream()
            raise HTTPError(503, "too_many_streams", "Too many open streams; retry shortly.",
                            headers={"Retry-After": "1"})
        self.metrics.set_open_streams(self.gate.open)

        def closed() -> None:
            self.gate.leave()
            if shared is not None:
                shared.leave_stream()
            self.metrics.set_open_streams(self.gate.open)
            if forget:  # store: false: nothing is kept once its stream has ended
                svc.forget_when_done(rid)

        def cut_slow_reader() -> None:  # the log then ends with slow_reader, not "the client disconnected"
            svc.cancel_running(rid, "slow_reader", "The client stopped reading.")

        return EventStreamResponse(
            store=backend_of(svc.store, rid), response_id=rid, after=after, dialect=svc.dialect,
            keepalive_seconds=self.config.keepalive_seconds, headers=headers or [],
            on_disconnect=(lambda: svc.on_client_gone(rid)) if foreground else None, on_close=closed,
            on_slow_reader=cut_slow_reader if foreground else None,
            slow_reader_timeout=self.config.slow_reader_timeout_seconds,
        )

    # -- /v1/responses ---------------------------------------------------------------------------------------------
    async def create(self, request: Request) -> Response | EventStreamResponse:
        owner = self.authenticate(request)
        await self.limit_rate(request, owner)
        body = await self.read_json(request)
        svc = self.svc
        req = parse_request(body, server_tool_names=svc.tools.names(), dialect=svc.dialect.name)
        req.affinity = affinity_key(request.headers, req.prompt_cache_key)
        stream = req.stream
        if stream is None:  # absent means JSON (the standard, issue #29); platform: SSE when Accept asks for it
            stream = (svc.dialect.stream_on_accept and not req.background
                      and _wants_event_stream(request.headers.get("accept", "")))
        if stream and self.gate.open >= self.gate.limit:
            raise HTTPError(503, "too_many_streams", "Too many open streams; retry shortly.",
                            headers={"Retry-After": "1"})
        record, _ = await svc.start(req, owner=owner)
        # The id in a header, so a client whose connection drops inside the first event can still resume (or
        # cancel) a background response.
        id_header = {"x-response-id": record.id}
        # store: false -> not kept once the client has it (the stream ended, or the JSON is built).
        if stream:
            return await self._stream_response(record.id, -1, foreground=not req.background,
                                               headers=[(b"x-response-id", record.id.encode())],
                                               forget=not req.store)
        if req.background:
            return JSONResponse(record.response, headers=id_header)
        await svc.wait(record.id)
        final = await svc.store.get(record.id)
        if not req.store:
            svc.forget_when_done(record.id)
        return JSONResponse(final.response if final is not None else record.response, headers=id_header)

    async def _record(self, request: Request) -> Any:
        owner = self.authenticate(request)
        await self.limit_rate(request, owner)
        rid = request.path_params["response_id"]
        record = await self.svc.store.get(rid)
        if record is None or record.owner != owner or record.request.get("store") is False:
            raise HTTPError(404, "not_found", f"Response with id '{rid}' not found.", param="response_id")
        return record

    async def retrieve(self, request: Request) -> Response | EventStreamResponse:
        record = await self._record(request)
        if request.query_params.get("stream", "").lower() not in ("true", "1"):
            return JSONResponse(record.response)
        # An EventSource reconnect keeps the original URL (with its starting_after) and adds Last-Event-ID: the
        # larger cursor is where the client really is.
        after = max(_cursor(request.query_params.get("starting_after"), "starting_after"),
                    _cursor(request.headers.get("last-event-id"), "Last-Event-ID"))
        store = self.svc.store
        if not await store.read(record.id, after, limit=1):
            fresh = await store.get(record.id)
            if fresh is None or fresh.status in TERMINAL_STATUSES:
                return Response(status_code=204)
        return await self._stream_response(record.id, after, foreground=False)

    async def cancel(self, request: Request) -> Response:
        record = await self._record(request)
        await self.svc.cancel(record.id)
        final = await self.svc.store.get(record.id)
        return JSONResponse((final or record).response)

    async def delete(self, request: Request) -> Response:
        record = await self._record(request)
        await self.svc.cancel(record.id)
        await self.svc.store.delete(record.id)
        return JSONResponse({"id": record.id, "object": "response.deleted", "deleted": True})

    # -- the rest --------------------------------------------------------------------------------------------------
    async def models(self, request: Request) -> Response:
        self.authenticate(request)
        router: Any = self.svc.router
        upstreams = list(self.components.upstreams if self.components else [])
        upstreams = [u for u in upstreams or getattr(router, "upstreams", []) if hasattr(u, "models")]
        served = [(m, next((u for u in upstreams if m in getattr(u, "models", ())), None)) for m in router.models()]
        health = self.health.known()
        served_by: dict[str, list[dict[str, Any]]] = {}
        for upstream in upstreams:
            for model in getattr(upstream, "models", []):
                served_by.setdefault(model, []).append(
                    {"name": upstream.name, "healthy": health.get(upstream.name, {}).get("healthy", True)})
        served_by["auto"] = [{"name": u.name, "healthy": health.get(u.name, {}).get("healthy", True)}
                             for u in upstreams]
        data = self.svc.catalog.listing(served)  # every model and alias with its input_modalities
        for entry in data:
            found = served_by.get(entry.get("alias_for", entry["id"]))
            if found is not None:
                entry["upstreams"] = found
        return JSONResponse({"object": "list", "data": data})

    async def healthz(self, request: Request) -> Response:
        """Liveness: the process answers. Readiness (store and upstreams) is /readyz."""
        ready = self.service is not None
        return JSONResponse({"status": "ok" if ready else "starting", "dialect": self.config.dialect,
                             "instance_id": self.config.instance_id, "running": len(self.svc.running) if ready else 0},
                            status_code=200 if ready else 503)

    async def readyz(self, request: Request) -> Response:
        """Readiness: the store answers and at least one upstream is healthy; 503 otherwise. The breakdown (store,
        upstreams with their addresses and errors) only for a valid API key, or on an open (loopback) gateway."""
        if self.service is None or self.components is None:
            return JSONResponse({"status": "starting"}, status_code=503, headers={"Retry-After": "1"})
        report = await self.health.check(self.svc.store, self.components.upstreams, self.svc.router)
        if self.keys.enabled and not self._has_valid_key(request):
            # Upstream addresses and their errors are for a key holder: a balancer needs only the status.
            report = {"status": report["status"]}
        return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503,
                            headers={"Cache-Control": "no-store"})

    def _has_valid_key(self, request: Request) -> bool:
        """Whether the request carries a valid API key (wrong keys count against auth_failures as anywhere)."""
        try:
            self.authenticate(request)
        except HTTPError:
            return False
        return True

    async def metrics_text(self, request: Request) -> Response:
        if self.metrics_key_required:
            self.authenticate(request)  # with API keys configured, the metrics are not public either
        if self.service is not None:
            self.metrics.set_running(len(self.service.running))
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document(self.config.dialect))

    async def index(self, request: Request) -> Response:
        page = self.static_dir() / "index.html"
        if page.is_file():
            return FileResponse(page, headers={"Cache-Control": "no-store"})
        return PlainTextResponse("The playground is not installed (server/static/index.html is missing).\n",
                                 status_code=404)

    async def favicon(self, request: Request) -> Response:
        icon = self.static_dir() / "favicon.ico"
        if icon.is_file():
            return FileResponse(icon, media_type="image/x-icon", headers={"Cache-Control": "max-age=86400"})
        return PlainTextResponse("no favicon\n", status_code=404)

    def static_dir(self) -> Path:
        return Path(self.config.static_dir) if self.config.static_dir else STATIC_DIR


MAX_CURSOR = (1 << 53) - 1  # largest resume cursor (sequence number) accepted


def _cursor(raw: str | None, name: str) -> int:
    """A resume cursor (``-1`` when absent or empty). Raises a 400 :class:`HTTPError` naming ``name``."""
    if raw is None or not raw.strip():
        return -1
    text = raw.strip()
    try:
        after = int(text) if len(text) <= 24 else None
    except ValueError:
        raise HTTPError(400, "invalid_value", f"{name} must be an integer, not {raw[:40]!r}",
                        param="starting_after") from None
    # Every store takes this bound (SQLite's INTEGER and Redis stream ids are 64-bit; JSON clients lose precision
    # past 2^53): a larger cursor is a clear 400, never an overflow deep in a store.
    if after is None or not -1 <= after <= MAX_CURSOR:
        raise HTTPError(400, "invalid_value", f"{name} must be between -1 and {MAX_CURSOR}, not {raw[:40]!r}",
                        param="starting_after")
    return after


def _bad_utf8_at(body: bytes) -> int:
    """Byte offset of the first invalid UTF-8 sequence in ``body`` (0 if it is valid after all)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return 0


def _wants_event_stream(accept: str) -> bool:
    """True when ``Accept`` names ``text/event-stream`` (with a non-zero ``q``); ``*/*`` alone does not."""
    for part in accept.split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        if media == "text/event-stream":
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
    return False


def create_app(config: Config | None = None, components: Components | None = None) -> Starlette:
    """The gateway ASGI app. ``components`` injects a store/router/tools/rewriter (tests); the rest is built."""
    config = config or Config()
    if not config.instance_id:  # `respstream serve` sets a stable one (config.stable_instance_id)
        config.instance_id = uuid.uuid4().hex[:12]
    gw = _Gateway(config, components or Components())
    routes: list[Any] = [
        Route("/v1/responses", gw.create, methods=["POST"]),
        WebSocketRoute("/v1/responses", functools.partial(serve_websocket, gw)),
        Route("/v1/responses/compact", functools.partial(compact, gw), methods=["POST"]),
        Route("/v1/responses/input_tokens", functools.partial(input_tokens, gw), methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", functools.partial(list_input_items, gw), methods=["GET"]),
        Route("/v1/responses/{response_id}", gw.retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", gw.delete, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/cancel", gw.cancel, methods=["POST"]),
        *conversation_routes(gw),
        Route("/v1/models", gw.models, methods=["GET"]),
        Route("/healthz", gw.healthz, methods=["GET"]),
        Route("/readyz", gw.readyz, methods=["GET"]),
        Route("/metrics", gw.metrics_text, methods=["GET"]),
        Route("/openapi.json", gw.openapi, methods=["GET"]),
        Route("/", gw.index, methods=["GET"]),
        Route("/favicon.ico", gw.favicon, methods=["GET"]),
    ]
    static = gw.static_dir()
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
