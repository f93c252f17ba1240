"""Server throughput: our gateway vs a bare uvicorn + Starlette floor and sse-starlette, same events, one run.

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
  tests/fakes/chat_server.py's SIMULATED Chat Completions server streaming 200 content chunks. The fake upstream
  cannot have a core of its own on a 2-core machine; it shares core 1 with the load generator.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import LoadResult, run_load

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
BODY = b'{"input": "hello"}'
DELTAS = 200
SERVERS = ("floor", "sse-starlette", "gateway", "gateway-http")


# -- the floor servers (run as: server_throughput.py --serve floor|sse-starlette --frames F --port P) ------------------

def serve_floor(kind: str, frames_path: str, port: int, delay_ms: float) -> None:
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
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def serve_fake_upstream(port_file: str) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.chat_server import Done, FakeChatCompletionsServer, finish, text, usage

    words = ("The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away.")
    server = FakeChatCompletionsServer(models=["fake-model"])
    server.script(*[text(("" if i == 0 else " ") + words[i % len(words)]) for i in range(DELTAS)],
                  finish(), usage(5, DELTAS), Done())  # the last script repeats for every request
    server.start()
    Path(port_file).write_text(str(server.port))
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop()


# -- orchestration --------------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(core: int, argv: list[str]) -> list[str]:
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(core), *argv] if taskset and (os.cpu_count() or 1) > 1 else argv


class Proc:
    """A server subprocess; ``url`` is its /v1/responses endpoint."""

    def __init__(self, argv: list[str], port: int, *, core: int = 0) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1/responses"
        self.proc = subprocess.Popen(pinned(core, argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv[:3]} exited: {self.proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(kind: str, frames_file: str, *, delay_ms: int = 0, upstream_url: str = "") -> Proc:
    port = free_port()
    if kind in ("floor", "sse-starlette"):
        argv = [sys.executable, __file__, "--serve", kind, "--frames", frames_file, "--port", str(port),
                "--delay-ms", str(delay_ms)]
    else:
        spec = f"scripted:{DELTAS}" + (f"?delay_ms={delay_ms}" if delay_ms else "")
        argv = [str(VENV_BIN / "respstream"), "serve", "--port", str(port), "--upstream",
                upstream_url if kind == "gateway-http" else spec]
    return Proc(argv, port)


def capture_frames(url: str) -> list[str]:
    """One gateway response, split into its SSE frames (each ending in a blank line)."""
    with httpx.Client(timeout=30) as client:
        raw = client.post(url, content=BODY, headers={"content-type": "application/json"}).content
    return [block + "\n\n" for block in raw.decode().split("\n\n") if block.strip()]


async def load_levels(url: str, levels: list[int], time_limit: float, expected: int) -> list[LoadResult]:
    await run_load(url, BODY, concurrency=10, total=50, time_limit=time_limit, expected_events=expected)  # warm-up
    results = []
    for level in levels:
        result = await run_load(url, BODY, concurrency=level, total=max(1000, 3 * level), time_limit=time_limit,
                                timeout=120, expected_events=expected)
        print(f"  {level:>5} streams: {json.dumps(result.summary())}", flush=True)
        results.append(result)
    return results


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

    port_file = tmp / "upstream.port"
    fake = subprocess.Popen(pinned(1, [sys.executable, __file__, "--serve", "fake-upstream", "--frames",
                                       str(port_file)]), cwd=ROOT, start_new_session=True)
    report: dict[str, Any] = {"events_per_request": expected, "levels": levels, "servers": {}, "memory": {}}
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline:
                raise RuntimeError("fake upstream did not start")
            time.sleep(0.05)
        upstream_url = f"http://127.0.0.1:{port_file.read_text()}/v1"
        runs: dict[str, list[list[dict[str, Any]]]] = {}
        for round_ in range(args.repeat):
            for kind in args.servers.split(","):
                print(f"{kind} (run {round_ + 1}/{args.repeat}):", flush=True)
                proc = start_server(kind, frames_file, upstream_url=upstream_url)
                try:
                    results = asyncio.run(load_levels(proc.url, levels, args.time, expected))
                finally:
                    proc.stop()
                runs.setdefault(kind, []).append([r.summary() for r in results])
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


def table(report: dict[str, Any]) -> str:
    servers = report["servers"]
    floor = {r["concurrency"]: r for r in servers.get("floor", [])}
    lines = ["| server | streams | events/s (median) | vs floor | every run | TTFB p50 ms | TTFB p99 ms | requests "
             "| errors |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, rows in servers.items():
        for r in rows:
            base = floor.get(r["concurrency"], {}).get("events_per_s") or 0
            ratio = f"{r['events_per_s'] / base:.2f}" if base else "-"
            errors = sum(r["errors"].values())
            every = " / ".join(f"{x:,}" for x in r.get("events_per_s_runs", [r["events_per_s"]]))
            lines.append(f"| {kind} | {r['concurrency']:,} | {r['events_per_s']:,} | {ratio} | {every} "
                         f"| {r['ttfb_p50_ms']:.1f} | {r['ttfb_p99_ms']:.1f} | {r['requests']:,} | {errors} |")
    if report["memory"]:
        lines += ["", "| server | streams held | held s | idle RSS MiB | peak RSS MiB | KiB per open stream | errors |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for kind, m in report["memory"].items():
            lines.append(f"| {kind} | {m['streams']:,} | {m['held_s']} | {m['idle_rss_kib'] / 1024:.1f} "
                         f"| {m['peak_rss_kib'] / 1024:.1f} | {m['kib_per_stream']} | {sum(m['errors'].values())} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--serve", choices=["floor", "sse-starlette", "fake-upstream"], help=argparse.SUPPRESS)
    parser.add_argument("--frames", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--delay-ms", type=float, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--levels", default="10,100,1000", help="concurrency levels (default 10,100,1000)")
    parser.add_argument("--servers", default=",".join(SERVERS), help="which servers (default all four)")
    parser.add_argument("--time", type=float, default=20.0, help="time cap per level, seconds (default 20)")
    parser.add_argument("--repeat", type=int, default=1, help="run every server this many times, in turn (median)")
    parser.add_argument("--hold", type=int, default=1000, help="streams held open for the memory figure (0: skip)")
    parser.add_argument("--hold-servers", default="floor,sse-starlette,gateway",
                        help="servers measured holding --hold streams (default floor,sse-starlette,gateway)")
    parser.add_argument("--json", default="/tmp/server_throughput.json", help="where to write the results")
    args = parser.parse_args()
    if args.serve == "fake-upstream":
        serve_fake_upstream(args.frames)
        return 0
    if args.serve:
        serve_floor(args.serve, args.frames, args.port, args.delay_ms)
        return 0
    report = run(args)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print()
    print(table(report))
    gw = {r["concurrency"]: r for r in report["servers"].get("gateway", [])}
    fl = {r["concurrency"]: r for r in report["servers"].get("floor", [])}
    if 100 in gw and 100 in fl and fl[100]["events_per_s"]:
        print(f"\ngateway / floor at 100 streams: {gw[100]['events_per_s'] / fl[100]['events_per_s']:.2f} "
              "(goal >= 0.60)")
    print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
