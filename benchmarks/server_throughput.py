"""Server throughput: our gateway vs a bare uvicorn + Starlette floor (and sse-starlette, LiteLLM), same events.

Usage (from the repository root)::

    .venv/bin/python benchmarks/server_throughput.py [--levels 10,100,1000] [--repeat 3] \\
        [--json /tmp/server_throughput.json]
    .venv/bin/python benchmarks/plot_server.py /tmp/server_throughput.json   # docs/img/server_throughput.png

Servers (each in its own process, pinned with ``taskset -c 0``; this orchestrator and its load generator pin
themselves to core 1, so server and client never share a core):

- ``floor``: uvicorn + Starlette ``StreamingResponse`` writing pre-encoded SSE frames, one ``send`` per frame.
- ``sse-starlette``: ``EventSourceResponse`` (its own task group, disconnect watcher and ping) yielding the same frames.
- ``gateway``: ``respstream serve --upstream scripted:200`` (the SIMULATED in-process backend, no delay): route,
  writer with the protocol rule checker, memory store, SSE sender.
- ``gateway-http`` (second figure): the gateway with ``--upstream http://127.0.0.1:P/v1`` in front of
  tests/fakes/chat_server.py's SIMULATED Chat Completions server streaming 200 content chunks, each one write of
  bytes encoded once at its start (the same bytes as its per-chunk ``Chunk`` steps). The fake upstream cannot have a
  core of its own on a 2-core machine; it shares core 1 with the load generator, which is why it must not encode per
  request (docs/benchmarks.md, ninth pass: it then set the gateway's pace, not the gateway).
- ``gateway-http-burst`` (explanatory, not in the default run): the same, with the fake upstream writing the same
  bytes 26 chunks at a time (``--burst 26``). Its body then arrives as ~9 HTTP chunks instead of ~210 (and in ~1.6
  upstream reads a response instead of ~3 at full speed): against ``gateway-http`` it separates the hop's parsing and
  translation from the per-chunk framing, the per-read chain and the per-segment cost (docs/benchmarks.md, sixth and
  ninth passes).

Variants (issue #16): ``-pure`` runs the same server on asyncio + h11 instead of uvloop + httptools (the default
``http_stack auto`` with the ``fast`` extra installed), so the floor and the gateway are always compared on the same
stack. ``gateway-w1`` / ``gateway-w2``: ``respstream serve --workers 1|2 --store sqlite:///...`` (the same shared
store for both), NOT pinned: on a 2-core machine the workers, the load generator and the fake upstream share both
cores, so that ratio says what a second worker buys with the client on the same box, not on a dedicated one.
``litellm``: LiteLLM's proxy (its Responses API bridge) in front of the same fake upstream, run from its own venv
(``--litellm-venv``, default /tmp/respstream-litellm; skipped with a message when it is not installed there).

CPU per event: user + system CPU time of the server process and its children (workers), read from /proc before and
after each load level, divided by the events the load generator received. The fake upstream is not counted. Beside
it (benchmarks/procstat.py): the server's read and write calls per request (uvloop stacks only: asyncio's recv/send
are not in /proc/PID/io) and the idle share of its core; a server whose core idled more than 2% was waiting for its
peers, not saturated, and the ratios say so, since its CPU per event is then above its cost at full load.

The frames the floors send are captured from the gateway itself at the start of the run (one ``scripted:200``
response: created, routing, item added, part added, 200 deltas, text done, part done, item done, completed), so every
server sends the same bytes and the same number of events per request; the load generator checks that count.

Loads: the same bounded generator (benchmarks/loadgen.py) at each concurrency level: at most ``max(1000, 3C)``
requests and ``--time`` seconds each (a few seconds of load per level), after a warm-up. ``--repeat N`` runs the
servers N times in turn (floor, gateway, floor, gateway... so a change in the shared machine's load hits every server
alike) and reports, per server and level, the run with the median events/s (all runs are kept in the JSON).

Memory: a fresh server process, idle RSS after a warm-up,
then 1,000 streams held open at once (``scripted:200?delay_ms=50`` for the gateway, 50 ms between frames for the
floors, ~10 s per stream); peak RSS sampled every 50 ms from /proc minus idle RSS, divided by the stream count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import run_load
from procstat import Sample, sample

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
BODY = b'{"input": "hello", "stream": true}'
LITELLM_BODY = b'{"model": "fake-model", "input": "hello", "stream": true}'
LITELLM_KEY = "sk-respstream-bench-local-only"  # its proxy refuses to start without a master key
DELTAS = 200
SERVERS = ("floor", "gateway", "gateway-http", "floor-pure", "gateway-pure", "gateway-http-pure", "gateway-w1",
           "gateway-w2", "litellm")
UNPINNED = ("gateway-w1", "gateway-w2")  # the workers pair uses both cores (see the module docstring)
LITELLM_VENV_DEFAULT = "/tmp/respstream-litellm"
LITELLM_VENV = LITELLM_VENV_DEFAULT  # --litellm-venv
SATURATED_IDLE_PCT = 2.0  # a pinned server whose core idled more than this was not the bottleneck of its level


# -- the floor servers (run as: server_throughput.py --serve floor|sse-starlette --frames F --port P) ------------------

def serve_floor(kind: str, frames_path: str, port: int, delay_ms: float, stack: str = "auto") -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    frames: list[str] = json.loads(Path(frames_path).read_text(encoding="utf-8"))
    frames_b = [f.encode() for f in frames]
    delay = delay_ms / 1000

    async def events() -> Any:
        for i, frame in enumerate(frames_b):
            if delay and i:
                await asyncio.sleep(delay)
            yield frame

    async def handler(request: Request) -> Response:
        json.loads(await request.body())  # read and parse the request like the gateway does
        if kind == "floor":
            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"cache-control": "no-store", "x-accel-buffering": "no"})
        from sse_starlette.sse import EventSourceResponse

        return EventSourceResponse(events(), sep="\n", ping=15)

    app = Starlette(routes=[Route("/v1/responses", handler, methods=["POST"])])
    options = {"loop": "asyncio", "http": "h11"} if stack == "pure" else {}
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", **options)  # type: ignore[arg-type]


def fake_upstream_tokens() -> list[str]:
    """The DELTAS text tokens of the SIMULATED upstream's answer (its Chat Completions and Responses shapes)."""
    words = ("The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away.")
    return [("" if i == 0 else " ") + words[i % len(words)] for i in range(DELTAS)]


def fake_upstream_steps() -> list[Any]:
    """The SIMULATED Chat Completions upstream's script: DELTAS content chunks, finish, usage, [DONE]."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.chat_server import Done, finish, text, usage

    steps: list[Any] = [text(token) for token in fake_upstream_tokens()]
    return [*steps, finish(), usage(5, DELTAS), Done()]


def encoded_steps(steps: list[Any], burst: int = 1, pace_ms: float = 0) -> list[Any]:
    """``steps`` as the bytes the fake server would write for them (tests/fakes/chat_server.py), encoded once here,
    ``burst`` chunks to a write, with a pause of ``pace_ms`` between writes when given.

    Encoded once, not per request (docs/benchmarks.md, ninth pass): the fake shares core 1 with the load generator,
    and encoding 203 chunks for every request made that core the bottleneck, so the gateway waited, woke for a few
    chunks at a time and paid its per-read cost more often than a saturated gateway does."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.chat_server import Chunk, Done, Raw, Sleep

    def wire_bytes(step: Any) -> bytes:
        if isinstance(step, Chunk):
            return b"data: " + json.dumps(step.obj).encode() + b"\n\n"
        if isinstance(step, Done):
            return b"data: [DONE]\n\n"
        raise TypeError(f"encoded_steps takes Chunk and Done steps, not {type(step).__name__}")

    wire = [wire_bytes(s) for s in steps]
    out: list[Any] = [Raw(b"".join(wire[at : at + burst])) for at in range(0, len(wire), max(1, burst))]
    if pace_ms > 0:
        out = [step for at, one in enumerate(out) for step in ([Sleep(pace_ms / 1000)] if at else []) + [one]]
    return out


def serve_fake_upstream(port_file: str, burst: int = 1, pace_ms: float = 0) -> None:
    """The SIMULATED Chat Completions upstream, each chunk one write (``burst`` > 1: hop_instructions.py and the
    explanatory ``gateway-http-burst``: the same bytes written ``burst`` chunks at a time, so a response is a few HTTP
    chunks and TCP segments instead of one a chunk). ``pace_ms``: a pause that long between writes
    (hop_instructions.py --per-read: every write becomes one read of the gateway)."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.chat_server import FakeChatCompletionsServer

    server = FakeChatCompletionsServer(models=["fake-model"])
    server.script(*encoded_steps(fake_upstream_steps(), burst, pace_ms))  # the last script repeats for every request
    server.start()
    Path(port_file).write_text(str(server.port))
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop()


# -- orchestration --------------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(core: int | str, argv: list[str]) -> list[str]:
    """``argv`` run on ``core`` (a number, or a taskset list such as ``0-1``)."""
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(core), *argv] if taskset and (os.cpu_count() or 1) > 1 else argv


def all_cores() -> str:
    """Every core, as a taskset list: an "unpinned" server must say so, or it inherits this process's core 1."""
    return f"0-{(os.cpu_count() or 1) - 1}"


class Proc:
    """A server subprocess; ``url`` is its /v1/responses endpoint. ``core``: the core it is pinned to (None: all).
    ``counts_calls``: its read and write calls show in /proc/PID/io (uvloop's read/write; not asyncio's recv/send)."""

    def __init__(self, argv: list[str], port: int, *, core: int | None = 0, env: dict[str, str] | None = None,
                 path: str = "/v1/responses", start_timeout: float = 30, counts_calls: bool = True) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}{path}"
        self.core = core
        self.counts_calls = counts_calls
        # stderr to a file, never a pipe nobody reads: a server logging a line per request (the gateway's access
        # log) would fill the pipe and block.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the process; closed in stop())
        self.proc = subprocess.Popen(pinned(all_cores() if core is None else core, argv), stdout=subprocess.DEVNULL,
                                     stderr=self.log, cwd=ROOT, start_new_session=True, env=env)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"{argv[:3]} exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{argv[:3]} did not listen on {port}")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def sample(self) -> Sample:
        """CPU, read and write calls of the process tree, and its core's idle time (when pinned)."""
        return sample(self.proc.pid, self.core)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if self.url.endswith("/v1/responses") else signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def start_server(kind: str, frames_file: str, *, delay_ms: int = 0, upstream_url: str = "", burst_url: str = "",
                 tmp: Path | None = None) -> Proc:
    port = free_port()
    base = kind.removesuffix("-pure")
    stack = "pure" if kind.endswith("-pure") else "auto"
    counts_calls = stack != "pure"  # asyncio's recv/send are not in /proc/PID/io's syscr/syscw
    if base in ("floor", "sse-starlette"):
        argv = [sys.executable, __file__, "--serve", base, "--frames", frames_file, "--port", str(port),
                "--delay-ms", str(delay_ms), "--stack", stack]
        return Proc(argv, port, counts_calls=counts_calls)
    if kind == "litellm":
        return start_litellm(port, upstream_url)
    spec = f"scripted:{DELTAS}" + (f"?delay_ms={delay_ms}" if delay_ms else "")
    upstream = {"gateway-http": upstream_url, "gateway-http-burst": burst_url}.get(base, spec)
    argv = [str(VENV_BIN / "respstream"), "serve", "--port", str(port), "--http-stack", stack, "--upstream", upstream]
    if kind in UNPINNED:
        assert tmp is not None
        argv += ["--workers", kind[-1], "--store", f"sqlite:///{tmp / (kind + '.db')}"]
        return Proc(argv, port, core=None, counts_calls=counts_calls)
    return Proc(argv, port, counts_calls=counts_calls)


def start_litellm(port: int, upstream_url: str) -> Proc:
    """LiteLLM's proxy from its own venv, routing model ``fake-model`` to the fake upstream (offline: no telemetry,
    no model-cost map download).

    ``use_chat_completions_api: true`` is what makes this its Responses -> Chat Completions bridge: for an ``openai/``
    deployment LiteLLM otherwise forwards ``POST /v1/responses`` as it is to ``{api_base}/responses`` (OpenAI serves
    the Responses API itself), which the SIMULATED Chat Completions upstream answers 404 ("no route"), and every
    request failed. Its proxy refuses to start without a master key; ours is local only."""
    venv = Path(LITELLM_VENV)
    binary = venv / "bin" / "litellm"
    if not binary.exists():
        raise FileNotFoundError(f"LiteLLM is not installed in {venv} (python3 -m venv {venv} && {venv}/bin/pip "
                                "install 'litellm[proxy]')")
    cfg = venv / "respstream-bench.yaml"
    cfg.write_text("model_list:\n  - model_name: fake-model\n    litellm_params:\n      model: openai/fake-model\n"
                   f"      api_base: {upstream_url}\n      api_key: none\n      use_chat_completions_api: true\n"
                   "litellm_settings:\n  telemetry: false\n  drop_params: true\n")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
           "LITELLM_MASTER_KEY": LITELLM_KEY,
           "DISABLE_SCHEMA_UPDATE": "True", "NO_PROXY": "*"}
    return Proc([str(binary), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
                port, env=env, start_timeout=120)


def capture_frames(url: str) -> list[str]:
    """One gateway response, split into its SSE frames (each ending in a blank line)."""
    with httpx.Client(timeout=30) as client:
        raw = client.post(url, content=BODY, headers={"content-type": "application/json"}).content
    return [block + "\n\n" for block in raw.decode().split("\n\n") if block.strip()]


async def load_levels(proc: Proc, levels: list[int], time_limit: float, expected: int | None,
                      body: bytes = BODY, frame: bytes = b"\nid:",
                      headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    await run_load(proc.url, body, concurrency=10, total=50, time_limit=time_limit, expected_events=expected,
                   frame=frame, headers=headers)
    results = []
    for level in levels:
        before = proc.sample()
        result = await run_load(proc.url, body, concurrency=level, total=max(1000, 3 * level), time_limit=time_limit,
                                timeout=120, expected_events=expected, frame=frame, headers=headers)
        row = result.summary()
        row.update(level_counters(proc.sample().since(before), result.events, result.requests, proc.counts_calls))
        print(f"  {level:>5} streams: {json.dumps(row)}", flush=True)
        results.append(row)
    return results


def level_counters(used: Sample, events: int, requests: int, counts_calls: bool) -> dict[str, Any]:
    """A load level's server counters: CPU per event, read and write calls per request (None where the stack's calls
    are not counted), and the idle share of the server's core (None when it is not pinned)."""
    idle = used.core_idle_pct()
    return {"server_cpu_s": round(used.cpu_s, 3),
            "cpu_us_per_event": round(used.cpu_s / events * 1e6, 2) if events else None,
            "server_reads_per_request": round(used.read_calls / requests, 1) if counts_calls and requests else None,
            "server_writes_per_request": round(used.write_calls / requests, 1) if counts_calls and requests else None,
            "server_core_idle_pct": None if idle is None else round(idle, 1)}


async def hold_streams(proc: Proc, streams: int, expected: int) -> dict[str, Any]:
    """Idle RSS, then ``streams`` long streams at once: peak RSS delta per stream, duration, errors."""
    await run_load(proc.url, BODY, concurrency=5, total=5, time_limit=30, timeout=60)  # warm-up
    idle = proc.rss_kib()
    peak = idle
    all_open_at: list[float] = []

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, proc.rss_kib())
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    result = await run_load(proc.url, BODY, concurrency=streams, total=streams, time_limit=60, timeout=90,
                            expected_events=expected, on_all_open=lambda: all_open_at.append(time.perf_counter()))
    sampler.cancel()
    held = time.perf_counter() - all_open_at[0] if all_open_at else 0.0
    return {"streams": streams, "idle_rss_kib": idle, "peak_rss_kib": peak,
            "kib_per_stream": round((peak - idle) / streams, 1), "all_open": bool(all_open_at),
            "held_s": round(held, 1), "elapsed_s": round(time.perf_counter() - started, 1),
            "errors": dict(result.errors), "ok": result.ok}


def run(args: argparse.Namespace) -> dict[str, Any]:
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the load generator's core; servers get core 0
    levels = [int(x) for x in args.levels.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="respstream-bench-"))
    frames_file = str(tmp / "frames.json")
    gateway = start_server("gateway", frames_file)
    try:
        frames = capture_frames(gateway.url)
    finally:
        gateway.stop()
    Path(frames_file).write_text(json.dumps(frames))
    expected = len(frames)
    print(f"events per request: {expected} ({DELTAS} deltas), {sum(map(len, frames))} bytes", flush=True)

    port_file, burst_file = tmp / "upstream.port", tmp / "upstream-burst.port"
    wanted = [(port_file, 1)] + ([(burst_file, 26)] if "gateway-http-burst" in args.servers.split(",") else [])
    fakes = [subprocess.Popen(pinned(1, [sys.executable, __file__, "--serve", "fake-upstream", "--frames",
                                         str(file), "--burst", str(burst)]), cwd=ROOT, start_new_session=True)
             for file, burst in wanted]
    report: dict[str, Any] = {"events_per_request": expected, "levels": levels, "servers": {}, "memory": {}}
    try:
        deadline = time.monotonic() + 20
        urls = []
        for file, _ in wanted:
            while not file.exists() or not file.read_text():
                if time.monotonic() > deadline:
                    raise RuntimeError("fake upstream did not start")
                time.sleep(0.05)
            urls.append(f"http://127.0.0.1:{file.read_text()}/v1")
        upstream_url, burst_url = urls[0], urls[1] if len(urls) > 1 else ""
        runs: dict[str, list[list[dict[str, Any]]]] = {}
        report["skipped"] = {}
        for round_ in range(args.repeat):
            for kind in args.servers.split(","):
                if kind in report["skipped"]:
                    continue
                print(f"{kind} (run {round_ + 1}/{args.repeat}):", flush=True)
                try:
                    proc = start_server(kind, frames_file, upstream_url=upstream_url, burst_url=burst_url, tmp=tmp)
                except (FileNotFoundError, RuntimeError) as exc:
                    if kind != "litellm":
                        raise
                    why = str(exc).strip().splitlines()[-1][:300]
                    print(f"  skipped: {why}", flush=True)
                    report["skipped"][kind] = why
                    continue
                lite = kind == "litellm"  # its own frames (no id: lines): count data: lines, any number
                try:
                    results = asyncio.run(load_levels(proc, levels, args.time, None if lite else expected,
                                                      LITELLM_BODY if lite else BODY,
                                                      b"\ndata:" if lite else b"\nid:",
                                                      {"authorization": f"Bearer {LITELLM_KEY}"} if lite else None))
                finally:
                    proc.stop()
                runs.setdefault(kind, []).append(results)
        report["runs"] = runs
        report["servers"] = {kind: [median_run([run[i] for run in kind_runs]) for i in range(len(levels))]
                             for kind, kind_runs in runs.items()}
        if args.hold:
            for kind in args.hold_servers.split(","):
                proc = start_server(kind, frames_file, delay_ms=50)
                try:
                    mem = asyncio.run(hold_streams(proc, args.hold, expected))
                finally:
                    proc.stop()
                print(f"{kind} hold: {json.dumps(mem)}", flush=True)
                report["memory"][kind] = mem
    finally:
        for fake in fakes:
            fake.send_signal(signal.SIGTERM)
            try:
                fake.wait(timeout=10)
            except subprocess.TimeoutExpired:
                fake.kill()
    return report


def median_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median events/s (the lower middle one for an even count), with every run's events/s."""
    ordered = sorted(rows, key=lambda r: r["events_per_s"])
    pick = dict(ordered[(len(ordered) - 1) // 2])
    pick["events_per_s_runs"] = [r["events_per_s"] for r in rows]
    return pick


def _floor_for(kind: str) -> str:
    return "floor-pure" if kind.endswith("-pure") else "floor"


def table(report: dict[str, Any]) -> str:
    """Every server and level: events/s against the floor on the same stack, and server CPU per event."""
    servers = report["servers"]
    lines = ["| server | streams | events/s (median) | vs floor (same stack) | every run | server CPU us/event "
             "| server core idle % | reads / writes a request | TTFB p50 ms | TTFB p99 ms | requests | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, rows in servers.items():
        floor = {r["concurrency"]: r for r in servers.get(_floor_for(kind), [])}
        for r in rows:
            base = floor.get(r["concurrency"], {}).get("events_per_s") or 0
            ratio = f"{r['events_per_s'] / base:.2f}" if base and kind not in UNPINNED else "-"
            errors = sum(r["errors"].values())
            every = " / ".join(f"{x:,}" for x in r.get("events_per_s_runs", [r["events_per_s"]]))
            cpu, idle = r.get("cpu_us_per_event"), r.get("server_core_idle_pct")
            reads, writes = r.get("server_reads_per_request"), r.get("server_writes_per_request")
            calls = "-" if reads is None or writes is None else f"{reads:.1f} / {writes:.1f}"
            lines.append(f"| {kind} | {r['concurrency']:,} | {r['events_per_s']:,} | {ratio} | {every} "
                         f"| {'-' if cpu is None else f'{cpu:.1f}'} | {'-' if idle is None else f'{idle:.1f}'} "
                         f"| {calls} | {r['ttfb_p50_ms']:.1f} | {r['ttfb_p99_ms']:.1f} | {r['requests']:,} "
                         f"| {errors} |")
    if report["memory"]:
        lines += ["", "| server | streams held | held s | idle RSS MiB | peak RSS MiB | KiB per open stream | errors |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for kind, m in report["memory"].items():
            lines.append(f"| {kind} | {m['streams']:,} | {m['held_s']} | {m['idle_rss_kib'] / 1024:.1f} "
                         f"| {m['peak_rss_kib'] / 1024:.1f} | {m['kib_per_stream']} | {sum(m['errors'].values())} |")
    return "\n".join(lines)


def ratios(report: dict[str, Any], level: int = 100) -> list[str]:
    """The issue's goals as ratios within this run (each line names both sides)."""
    at = {kind: {r["concurrency"]: r for r in rows}.get(level) for kind, rows in report["servers"].items()}
    out = []

    def eps(kind: str) -> float:
        row = at.get(kind)
        return float(row["events_per_s"]) if row else 0.0

    def cpu(kind: str) -> float:
        row = at.get(kind)
        return float(row.get("cpu_us_per_event") or 0) if row else 0.0

    for suffix in ("", "-pure"):
        if eps(f"gateway{suffix}") and eps(f"floor{suffix}"):
            out.append(f"gateway{suffix} / floor{suffix} events/s at {level} streams: "
                       f"{eps(f'gateway{suffix}') / eps(f'floor{suffix}'):.2f} (goal >= 0.90)")
        if cpu(f"gateway-http{suffix}") and cpu(f"gateway{suffix}"):
            out.append(f"gateway-http{suffix} / gateway{suffix} server CPU per event at {level} streams: "
                       f"{cpu(f'gateway-http{suffix}') / cpu(f'gateway{suffix}'):.2f} (goal <= 1.5)")
    if cpu("gateway-http-burst") and cpu("gateway"):
        out.append(f"gateway-http-burst / gateway server CPU per event at {level} streams: "
                   f"{cpu('gateway-http-burst') / cpu('gateway'):.2f} (explanatory: the upstream writes 26 chunks "
                   f"at a time)")
    if eps("gateway") and eps("gateway-pure"):
        out.append(f"gateway (uvloop + httptools) / gateway-pure (asyncio + h11) events/s: "
                   f"{eps('gateway') / eps('gateway-pure'):.2f}")
    if eps("floor") and eps("floor-pure"):
        out.append(f"floor / floor-pure events/s: {eps('floor') / eps('floor-pure'):.2f}")
    if eps("gateway-w2") and eps("gateway-w1"):
        out.append(f"gateway --workers 2 / --workers 1 events/s at {level} streams (unpinned, load generator and "
                   f"fake upstream on the same 2 cores): {eps('gateway-w2') / eps('gateway-w1'):.2f}")
    if eps("litellm") and eps("gateway-http"):
        out.append(f"gateway-http / litellm events/s at {level} streams: {eps('gateway-http') / eps('litellm'):.1f}x "
                   f"(goal >= 20x); server CPU per "
                   f"event litellm / gateway-http: {cpu('litellm') / max(cpu('gateway-http'), 1e-9):.1f}x "
                   "(their stream has its own event count)")
    out += paired(report, level)
    for kind, row in at.items():
        idle = row.get("server_core_idle_pct") if row else None
        if idle is not None and idle > SATURATED_IDLE_PCT:
            out.append(f"{kind}: its core idled {idle:.1f}% at {level} streams (> {SATURATED_IDLE_PCT}%): it was "
                       "waiting for its peers, not saturated, so its CPU per event is above its cost at full load")
    for kind, why in report.get("skipped", {}).items():
        out.append(f"{kind}: skipped ({why})")
    return out


def paired(report: dict[str, Any], level: int = 100) -> list[str]:
    """The goal ratios taken within each repeat (its servers ran back to back), then their median: on a shared
    machine whose speed drifts over minutes, a fairer figure than the ratio of two medians from different repeats."""
    runs: dict[str, list[list[dict[str, Any]]]] = report.get("runs", {})

    def rows(kind: str) -> list[dict[str, Any] | None]:
        return [{r["concurrency"]: r for r in run}.get(level) for run in runs.get(kind, [])]

    def line(name: str, num: str, den: str, field: str, goal: str) -> str | None:
        pairs = [(a, b) for a, b in zip(rows(num), rows(den), strict=False) if a and b and a.get(field)
                 and b.get(field)]
        if len(pairs) < 2:
            return None
        values = sorted(float(a[field]) / float(b[field]) for a, b in pairs)
        return (f"{name}, paired within each of {len(values)} repeats: median {statistics.median(values):.2f} "
                f"(from {values[0]:.2f} to {values[-1]:.2f}; goal {goal})")

    out = []
    for suffix in ("", "-pure"):
        for found in (line(f"gateway{suffix} / floor{suffix} events/s", f"gateway{suffix}", f"floor{suffix}",
                           "events_per_s", ">= 0.90"),
                      line(f"gateway-http{suffix} / gateway{suffix} CPU per event", f"gateway-http{suffix}",
                           f"gateway{suffix}", "cpu_us_per_event", "<= 1.5")):
            if found is not None:
                out.append(found)
    found = line("gateway-http-burst / gateway CPU per event", "gateway-http-burst", "gateway", "cpu_us_per_event",
                 "none: explanatory")
    if found is not None:
        out.append(found)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--serve", choices=["floor", "sse-starlette", "fake-upstream"], help=argparse.SUPPRESS)
    parser.add_argument("--frames", help=argparse.SUPPRESS)
    parser.add_argument("--burst", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--pace-ms", type=float, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--delay-ms", type=float, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--levels", default="10,100,1000", help="concurrency levels (default 10,100,1000)")
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"which servers (default {','.join(SERVERS)})")
    parser.add_argument("--stack", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--litellm-venv", default=LITELLM_VENV_DEFAULT,
                        help=f"LiteLLM's own venv (default {LITELLM_VENV_DEFAULT})")
    parser.add_argument("--time", type=float, default=20.0, help="time cap per level, seconds (default 20)")
    parser.add_argument("--repeat", type=int, default=1, help="run every server this many times, in turn (median)")
    parser.add_argument("--hold", type=int, default=1000, help="streams held open for the memory figure (0: skip)")
    parser.add_argument("--hold-servers", default="floor,gateway",
                        help="servers measured holding --hold streams (default floor,gateway)")
    parser.add_argument("--json", default="/tmp/server_throughput.json", help="where to write the results")
    args = parser.parse_args()
    if args.serve == "fake-upstream":
        serve_fake_upstream(args.frames, args.burst, args.pace_ms)
        return 0
    if args.serve:
        serve_floor(args.serve, args.frames, args.port, args.delay_ms, args.stack)
        return 0
    global LITELLM_VENV
    LITELLM_VENV = args.litellm_venv
    report = run(args)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print()
    print(table(report))
    print()
    for line in ratios(report, 100 if 100 in report["levels"] else report["levels"][0]):
        print(line)
    print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
