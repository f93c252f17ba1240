"""The systems on the board and how each is started in front of benchmarks/fake_upstreams.py's SIMULATED upstream.

- ``floor``: uvicorn + Starlette writing pre-encoded SSE frames (respstream's own answer to the board's request,
  captured at the start of the run), one ``send`` a frame (benchmarks/server_throughput.py's floor). It has no
  upstream: it is what a Python HTTP server costs with nothing else to do.
- ``respstream``: ``respstream serve --upstream chat+http://...`` (the Chat Completions bridge).
- ``respstream-native``: ``respstream serve --upstream responses+http://...`` (a native Responses upstream).
- ``respstream-granian``: the same app as ``respstream`` served by Granian instead of uvicorn (issue 41 step 5;
  present only where ``granian`` is installed in the gateway's venv).
- ``litellm``: LiteLLM's proxy, its Responses -> Chat Completions bridge (``use_chat_completions_api``).
- ``portkey``: the Portkey gateway (Node), ``POST /v1/responses`` with ``x-portkey-provider: openai`` and
  ``x-portkey-custom-host`` (it forwards the Responses request to the upstream's ``/responses``). It runs only with
  the ``@hono/node-server`` / ``@hono/node-ws`` pair the install script pins (scripts/bench_board_install.sh says
  why; its ``pins`` file is written only when npm honoured them).

Peers live in a bench-only environment outside the repository's venv (``RESPSTREAM_BENCH_DIR``, default
``~/.cache/respstream-bench``), installed by ``scripts/bench_board_install.sh`` at pinned versions; a peer that is
not installed there, or that does not answer the board's first request with a complete stream, is reported as
skipped with the reason, and the board goes on. Every server is pinned to core 0; the board's client and the
upstream to core 1.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_upstreams import DRIP_SECONDS
from server_throughput import Proc, free_port

__all__ = ["PEERS_DIR", "SYSTEMS", "System", "peer_versions", "start_for_suite", "start_resume_pair", "start_system"]

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
PEERS_DIR = Path(os.environ.get("RESPSTREAM_BENCH_DIR", Path.home() / ".cache" / "respstream-bench"))
# What the memory variants (stall, drip) raise each gateway's own cap on upstream connections to (respstream's
# upstream_options.max_concurrency, LiteLLM's aiohttp connector limits): above the 1,000 streams the board holds
HELD_STREAMS_LIMIT = 5000
LITELLM_KEY = "sk-respstream-bench-local-only"  # its proxy refuses to start without a master key; loopback only
PORTKEY_KEY = "sk-respstream-bench-local-only"  # forwarded to the SIMULATED upstream, which ignores it


@dataclass(frozen=True)
class System:
    name: str
    upstream_api: str  # "chat" or "responses": what it asks the upstream (its direct baseline asks the same)
    headers: tuple[tuple[str, str], ...] = ()
    gateway: bool = True  # False: the floor (no upstream, so no cut-stream check)
    notes: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # Why it has no Responses WebSocket mode on the board ("": it has one, at ``GET /v1/responses`` upgraded)
    no_websocket: str = "no WebSocket mode"


SYSTEMS: dict[str, System] = {
    "floor": System("floor", "chat", gateway=False, notes="uvicorn + Starlette, pre-encoded frames, no upstream"),
    "respstream": System("respstream", "chat", notes="Chat Completions bridge (uvicorn + uvloop + httptools)",
                         no_websocket=""),
    "respstream-native": System("respstream-native", "responses", notes="native Responses upstream",
                                no_websocket=""),
    "respstream-granian": System("respstream-granian", "chat", notes="Chat Completions bridge on Granian",
                                 no_websocket="served with Granian's --no-ws"),
    "litellm": System("litellm", "chat", headers=(("authorization", f"Bearer {LITELLM_KEY}"),),
                      notes="LiteLLM proxy, Responses -> Chat Completions bridge"),
    "portkey": System("portkey", "responses",
                      headers=(("authorization", f"Bearer {PORTKEY_KEY}"), ("x-portkey-provider", "openai")),
                      notes="Portkey gateway, Responses forwarded to the upstream's /responses"),
}


def start_resume_pair(upstream: str, tmp: Path) -> tuple[Proc, Proc]:
    """Two respstream instances (Chat Completions bridge) sharing one SQLite store: a response made on the first
    is resumed on the second (``GET /v1/responses/{id}?stream=true&starting_after=N``)."""
    store = f"sqlite:///{tmp / 'resume.db'}"
    first = _respstream(SYSTEMS["respstream"], f"{upstream}/v1", tmp, store=store)
    try:
        return first, _respstream(SYSTEMS["respstream"], f"{upstream}/v1", tmp, store=store)
    except Exception:
        first.stop()
        raise


def _respstream(system: System, upstream_v1: str, tmp: Path, *, granian: bool = False, store: str = "",
                config_extra: str = "", tag: str = "") -> Proc:
    port = free_port()
    config = tmp / f"{system.name}{tag}.toml"
    # Limits raised so the memory figures can hold their connections from one client address; everything else is
    # the default configuration (metrics on, access log on, the rule checker on every event).
    config.write_text("upstream_probe_seconds = 0\nmax_connections = 5000\nmax_concurrent_streams = 5000\n"
                      + config_extra)
    prefix = "responses+" if system.upstream_api == "responses" else "chat+"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if granian:
        env["RESPSTREAM_BOARD_UPSTREAM"] = prefix + upstream_v1
        env["RESPSTREAM_BOARD_CONFIG"] = str(config)
        argv = [str(VENV_BIN / "granian"), "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port),
                "--workers", "1", "--loop", "uvloop", "--log-level", "warning", "--no-ws",
                "--factory", "board_granian_app:app"]
        env["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent)
        return Proc(argv, port, env=env, start_timeout=60)
    argv = [str(VENV_BIN / "respstream"), "serve", "--port", str(port), "--upstream", prefix + upstream_v1,
            "--config", str(config)] + (["--store", store] if store else [])
    return Proc(argv, port, env=env, start_timeout=60)


def _floor(frames_file: Path, delay_ms: float) -> Proc:
    port = free_port()
    argv = [sys.executable, str(Path(__file__).with_name("server_throughput.py")), "--serve", "floor", "--frames",
            str(frames_file), "--port", str(port), "--delay-ms", str(delay_ms)]
    return Proc(argv, port)


def _litellm(upstream_v1: str, tmp: Path, variant: str) -> Proc:
    venv = PEERS_DIR / "litellm"
    binary = venv / "bin" / "litellm"
    if not binary.exists():
        raise FileNotFoundError(f"LiteLLM is not installed in {venv} (scripts/bench_board_install.sh)")
    port = free_port()
    cfg = tmp / f"litellm-{variant}.yaml"
    cfg.write_text("model_list:\n  - model_name: fake-model\n    litellm_params:\n      model: openai/fake-model\n"
                   f"      api_base: {upstream_v1}\n      api_key: none\n      use_chat_completions_api: true\n"
                   "litellm_settings:\n  telemetry: false\n  drop_params: true\n")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
           "LITELLM_MASTER_KEY": LITELLM_KEY, "DISABLE_SCHEMA_UPDATE": "True", "NO_PROXY": "*"}
    if variant in ("stall", "drip"):
        # The memory figures hold 1,000 streams to one upstream host: LiteLLM's aiohttp transport caps connections
        # at 500 a host and 1,000 in all by default (its own settings, litellm/constants.py), so 500 streams would
        # wait for a connection without a byte. Raised as respstream's max_concurrency is for the same variants.
        env.update(AIOHTTP_CONNECTOR_LIMIT_PER_HOST=str(HELD_STREAMS_LIMIT),
                   AIOHTTP_CONNECTOR_LIMIT=str(HELD_STREAMS_LIMIT))
    env.pop("PYTHONPATH", None)
    argv = [str(binary), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    return Proc(argv, port, env=env, start_timeout=180)


def _portkey() -> Proc:
    script = PEERS_DIR / "portkey" / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    if not script.exists():
        raise FileNotFoundError(f"the Portkey gateway is not installed in {script.parent.parent} "
                                "(scripts/bench_board_install.sh)")
    if not (PEERS_DIR / "portkey" / "pins").exists():
        raise FileNotFoundError("the Portkey gateway was installed without the pinned hono pair (every request "
                                "would be a 500 'TypeError: immutable'); rerun scripts/bench_board_install.sh")
    port = free_port()
    return Proc(["node", str(script), f"--port={port}", "--headless"], port, start_timeout=60)


def start_system(system: System, upstream: str, variant: str, tmp: Path,
                 frames_file: Path) -> tuple[Proc, dict[str, str]]:
    """Start ``system`` in front of ``upstream`` (``http://127.0.0.1:P``) for ``variant``: ``normal``, ``long``
    (200 deltas a response), ``cut`` (the upstream dies mid-stream), ``stall`` (the upstream sends one frame and
    then nothing; the floor: its first frame, then nothing for an hour) or ``drip`` (the 200-delta stream, a frame
    every ``DRIP_SECONDS``, the floor likewise). Returns the process
    and the extra request headers. Raises FileNotFoundError / RuntimeError when it cannot run here."""
    prefix = "" if variant == "normal" else f"/{variant}"
    upstream_v1 = f"{upstream}{prefix}/v1"
    headers = dict(system.headers)
    if system.name == "floor":
        frames = frames_file.with_name("frames-long.json") if variant in ("long", "drip") else frames_file
        delay_ms = {"stall": 3_600_000, "drip": DRIP_SECONDS * 1000}.get(variant, 0)
        return _floor(frames, delay_ms), headers
    if system.name.startswith("respstream"):
        # Memory figures hold a thousand streams: each must reach the upstream, not wait in the queue of the upstream's
        # default 16 generations at once (upstream_options.max_concurrency), or the queued ones would pass for cheap.
        held = variant in ("stall", "drip")
        extra = f"upstream_options = {{ max_concurrency = {HELD_STREAMS_LIMIT} }}\n" if held else ""
        return _respstream(system, upstream_v1, tmp, granian=system.name.endswith("granian"), config_extra=extra,
                           tag=f"-{variant}"), headers
    if system.name == "litellm":
        return _litellm(upstream_v1, tmp, variant), headers
    if system.name == "portkey":
        headers["x-portkey-custom-host"] = upstream_v1
        return _portkey(), headers
    raise ValueError(f"unknown system {system.name!r}")


def start_for_suite(system: System, upstream_v1: str, tmp: Path, *, respstream_config: str = "") -> Proc:
    """``system`` in front of ``upstream_v1`` (a base URL ending in ``/v1``, in the API ``system.upstream_api``
    names) for the Open Responses suite (benchmarks/board_compliance.py); respstream systems get
    ``respstream_config`` (TOML lines) after the board's own."""
    if system.name.startswith("respstream"):
        return _respstream(system, upstream_v1, tmp, granian=system.name.endswith("granian"),
                           config_extra=respstream_config, tag="-suite")
    if system.name == "litellm":
        return _litellm(upstream_v1, tmp, "suite")
    if system.name == "portkey":
        return _portkey()
    raise ValueError(f"{system.name!r} is not a gateway the suite can run against")


def peer_versions() -> dict[str, str]:
    """Installed versions of the peers (and the stacks) the board can name."""
    out: dict[str, str] = {}
    meta = PEERS_DIR / "litellm" / "lib"
    for found in sorted(meta.glob("python3*/site-packages/litellm-*.dist-info")):
        out["litellm"] = found.name.removeprefix("litellm-").removesuffix(".dist-info")
    node_modules = PEERS_DIR / "portkey" / "node_modules"
    for name, rel in (("portkey", "@portkey-ai/gateway"), ("hono", "hono"), ("@hono/node-server", "@hono/node-server"),
                      ("@hono/node-ws", "@hono/node-ws")):
        package = node_modules / rel / "package.json"
        if package.exists():
            out[name] = json.loads(package.read_text())["version"]
    from importlib import metadata

    for name in ("respstream", "uvicorn", "starlette", "uvloop", "httptools", "granian"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out

