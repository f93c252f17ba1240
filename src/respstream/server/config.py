"""Gateway configuration: one dataclass, loaded from a TOML or JSON file, overridden by CLI flags.

Every key is documented in docs/configuration.md. Unknown keys are an error naming the key (a typo must not silently
fall back to a default). Sub-tables ``router``, ``upstream_options``, ``tools``, ``rewrite`` and ``models`` are handed
as-is to the components that own them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import tomllib
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from respstream.server.request_limits import WorkLimits
from respstream.server.telemetry.settings import LoggingSettings, TelemetrySettings

__all__ = ["Config", "ConfigError", "load_config", "stable_instance_id"]


class ConfigError(ValueError):
    """A config file that cannot be read, or a key/value that is wrong. The message names the file and key."""


@dataclass(slots=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8080
    dialect: str = "platform"  # platform | openai | openresponses
    upstreams: list[str] = field(default_factory=lambda: ["embedded"])
    # The embedded model: small (SmolLM2-135M, fast) | medium (Qwen2.5-Coder-0.5B) | large (Qwen2.5-Coder-1.5B).
    model_size: str = "large"
    store: str = "memory"
    # Where background responses and conversations go when `store` is memory ("" = SQLite in data_dir).
    background_store: str = ""
    data_dir: str = ""  # empty: $RESPSTREAM_DATA_DIR, else $XDG_DATA_HOME/respstream (~/.local/share/respstream)
    lease_seconds: float = 10.0  # generation lease in shared stores (a dead instance is noticed within this)
    keys_file: str = ""  # JSON file of hashed API keys (respstream keys ...); empty: RESPSTREAM_KEYS_FILE or none
    # Names this instance's generation leases and unfinished logs, so a restart can end what it left behind.
    # Empty: `respstream serve` uses stable_instance_id() (persisted per data dir and port); an app built in code
    # without one gets a random id.
    instance_id: str = ""
    max_body_bytes: int = 1 << 20
    # Bytes of responses the memory store keeps (requests, snapshots, event logs); oldest finished dropped first.
    memory_store_max_bytes: int = 256 << 20
    # Redis store: recent acknowledged events kept per unfinished response, resent when a failover lost them.
    redis_resend_entries: int = 256
    redis_resend_max_bytes: int = 64 << 20  # all responses' kept events together
    max_concurrent_streams: int = 2000
    # Background generations running at once on this instance; past it a new background request -> 429.
    max_background_responses: int = 64
    max_background_responses_per_key: int = 16  # of those, at once for one API key (past it -> 429)
    # Deferred background work (background_options.completion_window; responses/deferred.py): this instance runs
    # at most deferred_concurrency of them at once, starts one only while at most deferred_max_interactive
    # interactive responses run here, or regardless when its window ends within deferred_urgent_seconds; it looks
    # at the shared queue every deferred_poll_seconds. `soonest` is a window of deferred_soonest_seconds.
    deferred_concurrency: int = 1
    deferred_max_interactive: int = 0
    deferred_urgent_seconds: float = 600.0
    deferred_poll_seconds: float = 1.0
    deferred_soonest_seconds: float = 900.0
    rate_limit_per_minute: float = 0.0  # per API key (or client address when open); 0 = off
    rate_limit_burst: int = 0  # bucket size; 0 = same as rate_limit_per_minute
    # Requests with a wrong API key allowed per client address (token bucket); past it -> 429 (0 = off).
    auth_failures_per_minute: float = 30.0
    auth_failures_burst: int = 10
    # With a Redis store: the rate limit and the stream budget below are kept in Redis, across every instance.
    shared_limits: bool = True
    shared_max_concurrent_streams: int = 0  # open streams across all instances on the Redis store; 0 = off
    keepalive_seconds: float = 15.0
    progress_event_seconds: float = 20.0  # a quiet response gets a `keepalive` event (0: off); progress_events.py
    # A reader whose socket takes nothing for this long is cut with `error` `slow_reader` (0: never).
    slow_reader_timeout_seconds: float = 30.0
    max_tool_rounds: int = 4
    # WebSocket mode (server/websocket/): a connection lives at most this long (the spec's 60 minutes), keeps
    # this many of its responses for previous_response_id, and holds this many response.create messages queued.
    websocket_max_connection_seconds: float = 3600.0
    websocket_cache_responses: int = 64
    websocket_max_queued_messages: int = 64
    # ...and at most these bytes of them (per connection; all connections together), closes a connection that sent
    # no message for websocket_idle_timeout_seconds (0: never), and lets one API key's connections keep this many
    # bytes of store: false responses together (all keys: memory_store_max_bytes).
    websocket_max_queued_bytes: int = 4 << 20
    websocket_max_queued_bytes_total: int = 64 << 20
    websocket_idle_timeout_seconds: float = 300.0
    websocket_store_max_bytes_per_key: int = 64 << 20
    # Lanes (`stream_id`, server/websocket/session.py): responses running together on one connection, distinct
    # stream ids over its life (both the spec's numbers), and bytes of creates waiting on one lane (they count
    # against websocket_max_queued_bytes and websocket_max_queued_bytes_total as well).
    websocket_max_in_flight: int = 16
    websocket_max_stream_ids: int = 32
    websocket_max_queued_bytes_per_stream: int = 1 << 20
    retention_seconds: float = 24 * 3600.0
    conversation_window: int = 40  # items of conversation history the model sees
    max_event_bytes: int = 16 << 20
    shutdown_grace_seconds: float = 5.0
    # Send `respstream:response.routing.completed` in the openresponses dialect too (off: the public suite's
    # validator refuses every event outside the spec; the routed model is the Response's `model` either way).
    openresponses_routing_event: bool = False
    check_events: bool = True  # run the protocol rule checker on every emitted event
    # A request field this gateway has never heard of: false = accepted and reported (x-respstream-ignored-fields,
    # a log line, respstream_ignored_request_fields); true = 400 unknown_parameter naming it.
    strict_fields: bool = False
    # Connection limits (server/http/http_guard.py, docs/security.md): the whole request (head and body) must arrive
    # within request_timeout_seconds of the connection opening or the previous response; past max_connections a
    # new connection is closed at once.
    request_timeout_seconds: float = 10.0
    max_connections: int = 1000
    # ...and the request head alone within header_timeout_seconds. When the pool is full, a new connection takes the
    # place of one making no progress (a head that has not come, an idle keep-alive or WebSocket), by fair share
    # across clients (server/http/peer_limit.py); one client address (IPv6: its /64, or /48 when crowded) may also be
    # capped at max_connections_per_client (0 = no cap; trusted_proxies are exempt).
    header_timeout_seconds: float = 5.0
    max_connections_per_client: int = 0
    keep_alive_seconds: float = 5.0  # idle keep-alive connections are closed after this
    listen_backlog: int = 1024
    gc_young_threshold: int = 50000  # `serve`: net allocations between young collections (0: Python's default)
    max_header_bytes: int = 16384  # uvicorn h11_max_incomplete_event_size: larger request heads -> 400
    # Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses or CIDRs); empty: none, the rate
    # limit keys on the real peer address.
    trusted_proxies: list[str] = field(default_factory=list)
    workers: int = 1  # gateway processes sharing the port (server/http/workers.py); > 1 needs a shared store
    http_stack: str = "auto"  # auto | fast (uvloop + httptools) | pure (asyncio + h11); server/http/http_stack.py
    static_dir: str = ""  # empty: the packaged playground (server/static)
    # Every upstream's health is probed this often (GET /models or its probe()); one that failed its last probe
    # gets requests a 503 naming it, and one that lists no model yet is asked again (0: only at startup).
    upstream_probe_seconds: float = 5.0
    router: dict[str, Any] = field(default_factory=dict)
    upstream_options: dict[str, Any] = field(default_factory=dict)  # timeouts, retries... for every upstream
    tools: dict[str, Any] = field(default_factory=dict)
    rewrite: dict[str, Any] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)  # aliases, input_modalities, context_window
    telemetry: dict[str, Any] = field(default_factory=dict)  # [telemetry]: traces, OTLP endpoint, metrics
    logging: dict[str, Any] = field(default_factory=dict)  # [logging]: level, format, access_log, levels
    limits: dict[str, Any] = field(default_factory=dict)  # [limits]: work caps per request (request_limits.py)

    def validate(self) -> None:
        """Raises :class:`ConfigError` for a value out of range."""
        if self.dialect not in ("platform", "openai", "openresponses"):
            raise ConfigError(f"dialect must be platform, openai or openresponses, not {self.dialect!r}")
        if not self.upstreams:
            raise ConfigError("at least one upstream is needed (upstreams = [\"embedded\"])")
        if self.model_size not in ("small", "medium", "large"):
            raise ConfigError(f"model_size must be small, medium or large, not {self.model_size!r}")
        for name in ("max_body_bytes", "max_concurrent_streams", "max_event_bytes", "websocket_cache_responses",
                     "websocket_max_queued_messages", "memory_store_max_bytes", "max_background_responses",
                     "max_background_responses_per_key", "websocket_max_queued_bytes",
                     "websocket_max_queued_bytes_total", "websocket_store_max_bytes_per_key",
                     "max_connections", "listen_backlog", "max_header_bytes", "websocket_max_in_flight",
                     "websocket_max_stream_ids", "websocket_max_queued_bytes_per_stream"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be between 0 and 65535, not {self.port}")
        if self.gc_young_threshold < 0:
            raise ConfigError(f"gc_young_threshold must not be negative, not {self.gc_young_threshold}")
        if self.header_timeout_seconds < 0 or self.max_connections_per_client < 0:
            raise ConfigError("header_timeout_seconds and max_connections_per_client must not be negative (0: off)")
        if self.request_timeout_seconds < 0 or self.keep_alive_seconds <= 0:
            raise ConfigError("request_timeout_seconds must not be negative and keep_alive_seconds must be positive")
        if self.websocket_idle_timeout_seconds < 0:
            raise ConfigError("websocket_idle_timeout_seconds must not be negative (0: no idle timeout)")
        if self.progress_event_seconds < 0:
            raise ConfigError("progress_event_seconds must not be negative (0 turns the keepalive events off)")
        if self.keepalive_seconds <= 0 or self.websocket_max_connection_seconds <= 0:
            raise ConfigError("keepalive_seconds and websocket_max_connection_seconds must be positive")
        if self.redis_resend_entries < 0 or self.redis_resend_max_bytes < 0:
            raise ConfigError("redis_resend_entries and redis_resend_max_bytes must not be negative")
        if self.lease_seconds <= 0 or self.retention_seconds <= 0:
            raise ConfigError("lease_seconds and retention_seconds must be positive")
        if self.slow_reader_timeout_seconds < 0 or self.shutdown_grace_seconds < 0:
            raise ConfigError("slow_reader_timeout_seconds and shutdown_grace_seconds must not be negative")
        if self.deferred_concurrency < 0 or self.deferred_max_interactive < 0 or self.deferred_urgent_seconds < 0:
            raise ConfigError("deferred_concurrency, deferred_max_interactive and deferred_urgent_seconds must not "
                              "be negative")
        if self.deferred_poll_seconds <= 0 or self.deferred_soonest_seconds <= 0:
            raise ConfigError("deferred_poll_seconds and deferred_soonest_seconds must be positive")
        if self.upstream_probe_seconds < 0:
            raise ConfigError("upstream_probe_seconds must not be negative")
        for spec in self.upstreams:
            options = self.options_for(spec)
            models, length = options.get("models"), options.get("context_length")
            if models is not None and (not isinstance(models, list) or not all(isinstance(m, str) and m
                                                                              for m in models)):
                raise ConfigError(f"upstream_options models of {spec!r} must be a list of model ids")
            if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
                raise ConfigError(f"upstream_options context_length of {spec!r} must be a positive token count")
        if self.shared_max_concurrent_streams < 0:
            raise ConfigError("shared_max_concurrent_streams must not be negative")
        if self.shared_max_concurrent_streams and not self.shared_limits_url():
            raise ConfigError("shared_max_concurrent_streams needs a Redis store (store = redis://... or "
                              "redis+cluster://...) and shared_limits = true")
        if self.workers < 1:
            raise ConfigError(f"workers must be at least 1, not {self.workers}")
        if self.http_stack not in ("auto", "fast", "pure"):
            raise ConfigError(f"http_stack must be auto, fast or pure, not {self.http_stack!r}")
        if self.max_tool_rounds < 0 or self.rate_limit_per_minute < 0:
            raise ConfigError("max_tool_rounds and rate_limit_per_minute must not be negative")
        from respstream.server.model_catalog import ModelCatalog

        try:
            ModelCatalog.from_config(self.models)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            self.telemetry_settings()
            self.logging_settings()
            self.work_limits()
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None

    def telemetry_settings(self) -> TelemetrySettings:
        return TelemetrySettings.from_mapping(self.telemetry)

    def logging_settings(self) -> LoggingSettings:
        return LoggingSettings.from_mapping(self.logging)

    def work_limits(self) -> WorkLimits:
        return WorkLimits.from_mapping(self.limits)

    def options_for(self, spec: str) -> dict[str, Any]:
        """Constructor options for the upstream ``spec``: the shared ``upstream_options`` plus, on top, a sub-table
        of ``upstream_options`` named exactly like the spec (``[upstream_options."http://127.0.0.1:8000/v1"]``)."""
        shared = {k: v for k, v in self.upstream_options.items() if not (isinstance(v, dict) and k in self.upstreams)}
        own = self.upstream_options.get(spec)
        # The embedded model's prompt-prefix cache lives in the data directory unless configured (other upstream
        # kinds ignore the option).
        prefix_cache_dir = str(self.resolved_data_dir() / "prefix-cache")
        return {"model_size": self.model_size, "prefix_cache_dir": prefix_cache_dir, **shared,
                **(own if isinstance(own, dict) else {})}

    def shared_limits_url(self) -> str:
        """The Redis URL the shared limits use ("" when limits are per instance)."""
        if self.shared_limits and self.store.startswith(("redis://", "rediss://", "unix://", "redis+cluster://",
                                                         "rediss+cluster://")):
            return self.store
        return ""

    def resolved_keys_file(self) -> str:
        return self.keys_file or os.environ.get("RESPSTREAM_KEYS_FILE", "")

    def resolved_data_dir(self) -> Path:
        """``data_dir``, else ``$RESPSTREAM_DATA_DIR``, else ``$XDG_DATA_HOME/respstream`` (``~/.local/share``)."""
        if self.data_dir:
            return Path(self.data_dir).expanduser()
        base = os.environ.get("RESPSTREAM_DATA_DIR")
        if base:
            return Path(base).expanduser()
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(xdg) / "respstream"

    def resolved_background_store(self) -> str:
        """The store URL for background responses and conversations: ``background_store``; else, when ``store``
        is ``memory``, the SQLite file ``<data dir>/respstream.db``; else ``store`` itself."""
        if self.background_store:
            return self.background_store
        if self.store in ("memory", "memory:", "memory://"):
            return f"sqlite:///{self.resolved_data_dir() / 'respstream.db'}"
        return self.store


_FIELDS = {f.name: f for f in fields(Config)}
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
log = logging.getLogger("respstream.server")


def stable_instance_id(config: Config) -> str:
    """The id a gateway started with ``config`` uses when ``instance_id`` is empty: the same across restarts with
    the same data dir and port, so the restarted instance's ``recover(instance_id)`` ends the logs the previous run
    left unfinished. Kept in ``<data dir>/instance-<port>.id`` (created with a random id on first use). When that
    file cannot be read or written, ``<hostname>-<port>``. Never raises."""
    path = config.resolved_data_dir() / f"instance-{config.port}.id"
    try:
        found = path.read_text(encoding="utf-8").strip()
        if _ID.fullmatch(found):
            return found
    except (OSError, UnicodeDecodeError):
        pass
    new = f"{uuid.uuid4().hex[:12]}-{config.port}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(new + "\n", encoding="utf-8")
        tmp.replace(path)  # atomic: a concurrent first start reads a whole id, never half of one
        return path.read_text(encoding="utf-8").strip() or new
    except OSError as exc:
        fallback = f"{socket.gethostname() or 'localhost'}-{config.port}"
        log.warning("cannot keep the instance id in %s (%s); using %s", path, exc, fallback)
        return fallback


def _coerce(key: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false")
        return value
    if isinstance(default, int | float) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number")
        return type(default)(value)
    if isinstance(default, list):
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key} must be a list of strings")
        return list(value)
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a table")
        return dict(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string")
    return value


def load_config(path: str | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults <- the file at ``path`` (TOML, or JSON by ``.json``) <- ``overrides`` (None values skipped).

    Raises :class:`ConfigError` naming the file and key.
    """
    config = Config()
    data: dict[str, Any] = {}
    if path:
        p = Path(path)
        try:
            raw = p.read_bytes()
            data = json.loads(raw) if p.suffix == ".json" else tomllib.loads(raw.decode("utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from exc
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a table/object")
        if isinstance(data.get("server"), dict):  # allow a [server] table as well as top-level keys
            data = {**{k: v for k, v in data.items() if k != "server"}, **data["server"]}
    for key, value in {**data, **{k: v for k, v in (overrides or {}).items() if v is not None}}.items():
        if key not in _FIELDS:
            where = f"{path}: " if path and key in data else ""
            raise ConfigError(f"{where}unknown config key {key!r} (see docs/configuration.md)")
        try:
            setattr(config, key, _coerce(key, value, getattr(config, key)))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}" if path and key in data else str(exc)) from None
    config.validate()
    return config
