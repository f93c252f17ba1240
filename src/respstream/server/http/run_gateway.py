"""One gateway process: :func:`serve_config` builds the app for a validated config and runs it on a
:class:`~respstream.server.http.serving.GatewayServer` (``respstream serve``, and each ``--workers`` worker).

Why here and not in ``commands/serve.py``: the workers (``workers.py``) run it too, and the server must not import
the command line (that was an import circle). The command passes its banner and upstream report in.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import uvicorn

from respstream.server.http.serving import GatewayServer

if TYPE_CHECKING:
    from respstream.server.config import Config

__all__ = ["serve_config", "tune_collector"]


def serve_config(config: Config, log_level: str, *, sockets: list[Any] | None = None, banner_text: str | None = None,
                 on_ready: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Run one gateway process for a validated ``config`` (``sockets``: already bound listening sockets, as
    ``--workers`` hands each worker). ``banner_text`` is printed once the app is built, ``on_ready`` gets the startup
    health report (``respstream serve`` passes both; a worker neither). Returns the exit status."""
    from respstream.server.http.app import create_app
    from respstream.server.http.http_guard import guarded_protocol, quiet_accept_errors
    from respstream.server.http.http_stack import StackError, uvicorn_options
    from respstream.server.telemetry import configure_logging

    try:
        stack = uvicorn_options(config.http_stack)
    except StackError as exc:
        print(f"respstream serve: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.logging_settings())
    app = create_app(config)
    if on_ready is not None:
        app.state.gateway.on_ready = on_ready
    if banner_text is not None:
        print(banner_text, flush=True)
    # Open streams already carry their terminal when uvicorn starts waiting for connections (GatewayServer drains
    # first), so this only bounds a client that does not read its last bytes.
    # WebSocket mode: the `websockets` implementation (a dependency), one message at most a request body (+ framing
    # slack, so the gateway answers an oversized one with its own 413 error event instead of a bare close).
    # Connection limits before auth (http/http_guard.py): the request read deadline and the connection cap ride on
    # the HTTP protocol class (h11 or httptools); forwarded headers are believed only from trusted_proxies (none
    # by default).
    quiet_accept_errors()
    http: Any = stack["http"]
    if http in ("h11", "httptools"):
        http = guarded_protocol(request_timeout=config.request_timeout_seconds,
                                max_connections=config.max_connections, http=http,
                                header_timeout=config.header_timeout_seconds,
                                max_connections_per_client=config.max_connections_per_client,
                                exempt=config.trusted_proxies)
    uv_config = uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level, lifespan="on",
                               access_log=False,  # ours (respstream.access) has the request and response ids
                               timeout_graceful_shutdown=int(config.shutdown_grace_seconds) + 1,
                               loop=cast(Any, stack["loop"]), http=http,
                               ws="websockets-sansio", ws_max_size=config.max_body_bytes + 4096,
                               limit_concurrency=config.max_connections + config.max_concurrent_streams,
                               backlog=config.listen_backlog, timeout_keep_alive=max(1, int(config.keep_alive_seconds)),
                               h11_max_incomplete_event_size=config.max_header_bytes,
                               proxy_headers=bool(config.trusted_proxies),
                               forwarded_allow_ips=list(config.trusted_proxies) or None)
    server = GatewayServer(uv_config, drain=app.state.gateway.drain)
    tune_collector(config)
    server.run(sockets=sockets)
    return 0 if server.started else 1


def tune_collector(config: Config) -> None:
    """Everything built so far (modules, app, config) lives as long as the process: moving it out of the
    collector's view makes each collection cheaper under load (about +10% events/s at 100 streams in benchmarks/).
    A stream allocates a few objects per event, nearly all freed by reference counting at once, so Python's default
    young threshold (a collection every 700 net allocations) ran the collector hundreds of times a second for little
    garbage; ``gc_young_threshold`` sets it (0 keeps Python's). Older generations keep their own thresholds."""
    gc.freeze()
    if config.gc_young_threshold:
        gc.set_threshold(config.gc_young_threshold, *gc.get_threshold()[1:])
