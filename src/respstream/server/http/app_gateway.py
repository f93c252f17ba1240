"""The gateway every handler shares (:class:`AppGateway`): config, limits and the service; the lifespan that builds
and stops them; the guards every request passes (API key, rate, the JSON body) and the caller's stored response.

Handlers take it as their first argument (the endpoints and the WebSocket mode through the
:class:`~respstream.server.endpoints.gateway.Gateway` Protocol); :func:`~respstream.server.http.app.create_app` makes
one per app, reachable as ``app.state.gateway``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request

from respstream.server import request_limits
from respstream.server.config import Config
from respstream.server.http.auth import KeyStore
from respstream.server.http.body_encoding import decoded_body
from respstream.server.http.components import Components, build_components
from respstream.server.http.limits import RateLimiter, StreamGate
from respstream.server.http.peer_limit import client_key
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.fair_share import charge_to
from respstream.server.inputs.request_memory import RequestMemory
from respstream.server.inputs.requests import parse_request
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.responses.deferred import DeferredWork
from respstream.server.responses.responses_service import ResponseService
from respstream.server.routing.affinity import affinity_key
from respstream.server.routing.upstream_watch import UpstreamWatch, startup_warnings
from respstream.server.store.base import Store
from respstream.server.store.deferred_factory import open_deferred_queue
from respstream.server.store.deferred_queue import MemoryDeferredQueue
from respstream.server.store.memory import MemoryStore
from respstream.server.telemetry import Tracing, current_request
from respstream.server.telemetry.health import HealthMonitor
from respstream.server.telemetry.metrics import Metrics, NoMetrics
from respstream.server.websocket.limits import WebSocketBudgets

if TYPE_CHECKING:
    from respstream.server.http.shared_limits import SharedLimits

__all__ = ["AppGateway"]

log = logging.getLogger("respstream.server")


class AppGateway:
    """The handlers' shared state: config, limits and the service."""

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
        caps = config.work_limits()  # what requests in flight hold, HTTP and WebSocket (inputs/request_memory.py)
        self.request_memory = RequestMemory(total=caps.requests_inflight_bytes,
                                            per_key=caps.requests_inflight_bytes_per_key)
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
        self.deferred: DeferredWork | None = None  # background_options.completion_window (responses/deferred.py)
        self._deferred_task: asyncio.Task[None] | None = None
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
        self.deferred = self._deferred_work(self.service, comps.store)
        self._deferred_task = asyncio.create_task(self.deferred.run())
        await self._report_readiness()
        self.watch.start()
        try:
            yield
        finally:
            self._expire_task.cancel()
            self._deferred_task.cancel()
            await self.watch.stop()
            await self.service.shutdown()
            for upstream in comps.upstreams:
                with contextlib.suppress(Exception):
                    await upstream.aclose()
            with contextlib.suppress(Exception):
                await self.deferred.queue.aclose()
            if self.given.store is None:
                await comps.store.aclose()
            if self.shared is not None:
                with contextlib.suppress(Exception):
                    await self.shared.aclose()
            self.tracing.shutdown()

    def _deferred_work(self, service: ResponseService, store: Store) -> DeferredWork:
        """The deferred-work scheduler, its queue on the store background responses live in (in memory when the
        whole store is)."""
        queue = MemoryDeferredQueue() if isinstance(store, MemoryStore) else open_deferred_queue(
            self.config.resolved_background_store())

        def parse(body: dict[str, Any]) -> ResponseRequest:
            req = parse_request(body, server_tool_names=service.tools.names(), dialect=service.dialect.name)
            req.affinity = affinity_key({}, req.prompt_cache_key)
            return req

        return DeferredWork(service, queue, self.config, parse)

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
        """The caller's owner id (hash of its key), or None on an open server. Raises 401. Also names the client
        that shared pools (the schema checks) count this request's waits for: the key, else the address block."""
        owner = self._authenticate(request)
        host = request.client.host if request.client else "anonymous"
        charge_to(f"key:{owner}" if owner is not None else f"peer:{client_key(host)}")
        return owner

    def _authenticate(self, request: HTTPConnection) -> str | None:
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

    async def read_json(self, request: Request, before_decode: Callable[[bytes], None] | None = None) -> Any:
        """The JSON body (``before_decode(body)`` is called with its bytes first: a memory reservation)."""
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
        if before_decode is not None:
            before_decode(body)
        try:
            return msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise HTTPError(400, "invalid_json", f"The request body is not valid JSON: {exc}") from None
        except UnicodeDecodeError:
            raise HTTPError(400, "invalid_json", f"The request body is not valid UTF-8 (at byte {_bad_utf8_at(body)})."
                            ) from None
        except RecursionError:  # body_values.check_depth bounds what decodes; this is what does not even decode
            raise HTTPError(400, "invalid_json", "The request body nests arrays/objects too deeply.") from None

    async def _record(self, request: Request) -> Any:
        owner = self.authenticate(request)
        await self.limit_rate(request, owner)
        rid = request.path_params["response_id"]
        record = await self.svc.store.get(rid)
        if record is None or record.owner != owner or record.request.get("store") is False:
            raise HTTPError(404, "not_found", f"Response with id '{rid}' not found.", param="response_id")
        return record


def _bad_utf8_at(body: bytes) -> int:
    """Byte offset of the first invalid UTF-8 sequence in ``body`` (0 if it is valid after all)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return 0
