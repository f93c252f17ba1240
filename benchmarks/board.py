"""The board: respstream beside the bare floor and the peer gateways, in one run, against the same SIMULATED upstream.

Usage (from the repository root; ``make bench-board`` installs the peers and runs it, about 20 minutes)::

    .venv/bin/python benchmarks/board.py [--systems floor,respstream,...] [--repeat 2] [--docs]
    .venv/bin/python benchmarks/board.py --smoke          # seconds: tiny loads, every installed system
    .venv/bin/python benchmarks/board.py --from-json docs/board-results.json --docs   # redraw, measure nothing

Per system (benchmarks/board_systems.py says how each is started; all pinned to core 0, this client and the
upstream to core 1) and per repeat, in an order that reverses every repeat:

- added latency against the direct upstream (benchmarks/added_latency.py), 1 and 64 clients: streaming (first event
  and last byte) and non-streaming;
- server CPU per 1,000 events and events/s with 64 streams in flight, on 10-delta responses (per-request costs in)
  and on 200-delta ones (a fresh process in front of the upstream's ``/long/`` answers: the per-event cost);
- for a system with a Responses WebSocket mode (respstream), WebSocket vs SSE per event: the server's CPU per 1,000
  events for the same responses over WebSocket sessions and over keep-alive SSE, alternated on the same instance,
  on both the 10-delta and the 200-delta instance (benchmarks/board_websocket.py); peers show why not;
then once per system: RSS per idle SSE connection (the upstream goes quiet after one frame) and, for respstream, per
idle WebSocket connection; RSS per active connection, SSE and (respstream) WebSocket, with events still flowing on
each (the upstream drips a frame every half second; benchmarks/board_active_memory.py); ``respstream check`` on
one captured stream, normal and with the upstream cut mid-stream; the public Open Responses suite's score
(benchmarks/board_compliance.py); and for respstream, resume latency: a response made on one instance, its stream
resumed (``starting_after``) on a second instance sharing its SQLite store, time to the first event. Ratios are
taken within a repeat (against respstream and against the floor) and their median reported.

Output: JSON (``--json``), Markdown tables and PNGs (benchmarks/board_report.py, benchmarks/board_plots.py); with
``--docs`` the tables, the machine, the versions and the plots replace the board section of docs/benchmarks.md
(between its ``board:start`` / ``board:end`` markers). ``--from-json`` redraws all that from an earlier run's JSON
without measuring (with ``--docs`` the JSON must be under docs/, and is linked, not rewritten).
A peer that is not installed, or does not answer the first request with a complete stream, is listed as skipped
with the reason, and the board goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from added_latency import Target, fetch
from board_active_memory import active_memory
from board_compliance import compliance_scores
from board_measure import check_stream, cpu_per_events, idle_memory, latency, request_body, resume_latency
from board_report import update_docs, write_outputs
from board_systems import SYSTEMS, System, peer_versions, start_resume_pair, start_system
from board_websocket import ws_vs_sse

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SYSTEMS = "floor,respstream,respstream-native,respstream-granian,litellm,portkey"

# ws_*: WebSocket vs SSE (board_websocket.py): sessions at once, responses a session (10-delta / 200-delta), pairs;
# 80 x 8 200-delta responses are ~0.8 s of server CPU a side, so one 10 ms clock tick is ~1% of the figure.
# active: connections held in flight for the RSS per active connection (board_active_memory.py)
FULL = {"rounds_1": 300, "rounds_64": 8, "cpu_requests": 1500, "idle": 1000, "time": 40.0, "clients": 64,
        "resume": 200, "active": 1000, "ws_clients": 8, "ws_turns": 150, "ws_turns_long": 80, "ws_pairs": 3}
SMOKE = {"rounds_1": 10, "rounds_64": 2, "cpu_requests": 24, "idle": 20, "time": 10.0, "clients": 4, "resume": 5,
         "active": 20, "ws_clients": 2, "ws_turns": 3, "ws_turns_long": 2, "ws_pairs": 2}


def start_upstream(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = tmp / "upstream.port"
    argv = [sys.executable, str(Path(__file__).with_name("fake_upstreams.py")), "--port-file", str(port_file)]
    taskset = ["taskset", "-c", "1"] if (os.cpu_count() or 1) > 1 else []
    proc = subprocess.Popen(taskset + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while not port_file.exists() or not port_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the SIMULATED upstream did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port_file.read_text()}"


async def capture_frames(url: str) -> list[str]:
    """respstream's answer to the board's request, as SSE frames (the floor writes these bytes)."""
    timing = await fetch(Target("capture", url, request_body("chat", stream=True, direct=False)), keep_body=True)
    if timing.error:
        raise RuntimeError(f"could not capture respstream's stream: {timing.error}")
    from board_measure import _dechunk

    text = _dechunk(timing.body).decode()
    return [block + "\n\n" for block in text.split("\n\n") if block.strip()]


async def first_check(url: str, headers: dict[str, str], api: str) -> str | None:
    """None when the system answers one streaming request with 200 and a terminal event; else why not."""
    target = Target("probe", url, request_body(api, stream=True, direct=False), tuple(headers.items()))
    timing = await fetch(target, timeout=60, keep_body=True)
    if timing.error or timing.status != 200:
        return f"its first request failed ({timing.error or timing.status}: {timing.body[:160]!r})"
    if b"response.completed" not in timing.body:
        return f"its stream has no response.completed ({timing.body[:160]!r})"
    return None


async def measure_round(system: System, url: str, headers: dict[str, str], pid: int, upstream: str,
                        sizes: dict[str, Any]) -> dict[str, Any]:
    v1 = f"{upstream}/v1"
    api = system.upstream_api
    row: dict[str, Any] = {}
    row["latency_1_stream"] = await latency(url, headers, api, v1, clients=1, rounds=sizes["rounds_1"],
                                            time_limit=sizes["time"], stream=True)
    if system.gateway:
        row["latency_1_json"] = await latency(url, headers, api, v1, clients=1, rounds=sizes["rounds_1"],
                                              time_limit=sizes["time"], stream=False)
    row["latency_64_stream"] = await latency(url, headers, api, v1, clients=sizes["clients"],
                                             rounds=sizes["rounds_64"], time_limit=sizes["time"], stream=True)
    row["cpu"] = await cpu_per_events(pid, url, headers, api, clients=sizes["clients"], total=sizes["cpu_requests"],
                                      time_limit=sizes["time"])
    if not system.no_websocket:
        row["ws_vs_sse"] = await ws_vs_sse(pid, url, headers, api, clients=sizes["ws_clients"],
                                           turns=sizes["ws_turns"], pairs=sizes["ws_pairs"], time_limit=sizes["time"])
    return row


async def run_board(args: argparse.Namespace) -> dict[str, Any]:
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    sizes = SMOKE if args.smoke else FULL
    names = [n for n in args.systems.split(",") if n]
    for name in names:
        if name not in SYSTEMS:
            raise SystemExit(f"board.py: unknown system {name!r} (known: {', '.join(SYSTEMS)})")
    tmp = Path(tempfile.mkdtemp(prefix="respstream-board-"))
    upstream_proc, upstream = start_upstream(tmp)
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                              "smoke": args.smoke, "sizes": sizes, "systems": {}, "skipped": {},
                              "rounds": [], "memory": {}, "correctness": {}, "compliance": {}}
    frames_file = tmp / "frames.json"
    try:
        for variant, file in (("normal", frames_file), ("long", frames_file.with_name("frames-long.json"))):
            proc, _ = start_system(SYSTEMS["respstream"], upstream, variant, tmp, frames_file)
            try:
                file.write_text(json.dumps(await capture_frames(proc.url)))
            finally:
                proc.stop()
        live = []
        for name in names:
            system = SYSTEMS[name]
            report["systems"][name] = {"notes": system.notes, "upstream_api": system.upstream_api,
                                       "gateway": system.gateway, "no_websocket": system.no_websocket}
            live.append(system)
        for repeat in range(args.repeat):
            order = live if repeat % 2 == 0 else list(reversed(live))
            rows: dict[str, Any] = {}
            for system in order:
                if system.name in report["skipped"]:
                    continue
                print(f"[repeat {repeat + 1}/{args.repeat}] {system.name}", flush=True)
                try:
                    proc, headers = start_system(system, upstream, "normal", tmp, frames_file)
                except (FileNotFoundError, RuntimeError) as exc:
                    report["skipped"][system.name] = str(exc).strip().splitlines()[-1][:300]
                    print(f"  skipped: {report['skipped'][system.name]}", flush=True)
                    continue
                try:
                    why = await first_check(proc.url, headers, system.upstream_api)
                    if why is not None:
                        report["skipped"][system.name] = why
                        print(f"  skipped: {why}", flush=True)
                        continue
                    rows[system.name] = await measure_round(system, proc.url, headers, proc.proc.pid, upstream,
                                                            sizes)
                    if repeat == 0:
                        report["correctness"][system.name] = {"normal": await check_stream(
                            proc.url, headers, system.upstream_api)}
                finally:
                    proc.stop()
                # CPU per event on 200-delta responses: the per-event cost, where per-request work weighs little.
                proc, headers = start_system(system, upstream, "long", tmp, frames_file)
                try:
                    rows[system.name]["cpu_long"] = await cpu_per_events(
                        proc.proc.pid, proc.url, headers, system.upstream_api, clients=sizes["clients"],
                        total=max(8, sizes["cpu_requests"] // 10), time_limit=sizes["time"])
                    if not system.no_websocket:
                        rows[system.name]["ws_vs_sse_long"] = await ws_vs_sse(
                            proc.proc.pid, proc.url, headers, system.upstream_api, clients=sizes["ws_clients"],
                            turns=sizes["ws_turns_long"], pairs=sizes["ws_pairs"], time_limit=sizes["time"])
                finally:
                    proc.stop()
                print(f"  {json.dumps(rows[system.name])[:400]}", flush=True)
            report["rounds"].append(rows)
        for system in live:
            if system.name in report["skipped"]:
                continue
            await once_per_system(system, upstream, tmp, frames_file, sizes, report)
        # The public Open Responses suite's score per system (benchmarks/board_compliance.py: how each is run).
        report["compliance"] = compliance_scores([s.name for s in live if s.name not in report["skipped"]], tmp)
        for name, why in report["skipped"].items():
            report["compliance"][name] = {"score": None, "reason": f"skipped on the board: {why}"}
        if "respstream" in names:  # resume on another instance: respstream only (no peer resumes a stream)
            print("[once] respstream resume", flush=True)
            first, second = start_resume_pair(upstream, tmp)
            try:
                report["resume"] = await resume_latency(first.url, second.url, rounds=sizes["resume"])
                print(f"  {json.dumps(report['resume'])}", flush=True)
            finally:
                first.stop()
                second.stop()
    finally:
        upstream_proc.send_signal(signal.SIGTERM)
        upstream_proc.wait(timeout=10)
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    report["machine"] = machine()
    report["versions"] = peer_versions()
    return report


async def once_per_system(system: System, upstream: str, tmp: Path, frames_file: Path, sizes: dict[str, Any],
                          report: dict[str, Any]) -> None:
    """The cut-stream check and the idle-connection memory (fresh processes, so earlier loads do not count)."""
    print(f"[once] {system.name}", flush=True)
    if system.gateway:
        proc, headers = start_system(system, upstream, "cut", tmp, frames_file)
        try:
            report["correctness"].setdefault(system.name, {})["cut"] = await check_stream(
                proc.url, headers, system.upstream_api)
        finally:
            proc.stop()
    proc, headers = start_system(system, upstream, "stall", tmp, frames_file)
    try:
        memory = {"sse": await idle_memory(proc.proc.pid, proc.url, headers, system.upstream_api,
                                           count=sizes["idle"])}
    finally:
        proc.stop()
    if not system.no_websocket:  # WebSocket mode: a fresh process, its own baseline
        proc, headers = start_system(system, upstream, "normal", tmp, frames_file)
        try:
            memory["websocket"] = await idle_memory(proc.proc.pid, proc.url, headers, system.upstream_api,
                                                    count=sizes["idle"], websocket=True)
        finally:
            proc.stop()
    # Active connections: fresh processes in front of the dripping upstream (a stream lasts minutes)
    for side in ("sse", "websocket") if not system.no_websocket else ("sse",):
        proc, headers = start_system(system, upstream, "drip", tmp, frames_file)
        try:
            memory[f"{side}_active"] = await active_memory(proc.proc.pid, proc.url, headers, system.upstream_api,
                                                           count=sizes["active"], websocket=side == "websocket")
        finally:
            proc.stop()
    report["memory"][system.name] = memory
    print(f"  {json.dumps(memory)}", flush=True)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "kernel": platform.release(), "load_average_at_end": [round(x, 2) for x in load],
            "node": subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
            if _has("node") else None}


def _has(binary: str) -> bool:
    from shutil import which

    return which(binary) is not None


def read_report(source: Path) -> dict[str, Any]:
    """An earlier run's JSON (``--from-json``), or a clear exit naming the file and what is wrong with it."""
    try:
        report = json.loads(source.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"board.py: cannot read the board's JSON {source}: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("rounds"), list):
        raise SystemExit(f"board.py: {source} is not the board's JSON (no 'rounds' list)")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--systems", default=DEFAULT_SYSTEMS, help=f"which systems (default {DEFAULT_SYSTEMS})")
    parser.add_argument("--repeat", type=int, default=2, help="measure every system this many times, in turn")
    parser.add_argument("--smoke", action="store_true", help="tiny loads: a seconds-long check that it all runs")
    parser.add_argument("--json", default="/tmp/respstream-board.json", help="where to write the results")
    parser.add_argument("--docs", action="store_true", help="write the table and plots into docs/benchmarks.md")
    parser.add_argument("--from-json", metavar="PATH",
                        help="measure nothing: redraw the tables (and with --docs the plots and the docs section) "
                             "from an earlier run's JSON, e.g. docs/board-results.json, which is left as it is")
    args = parser.parse_args()
    docs = ROOT / "docs" / "benchmarks.md"
    if args.from_json:
        source = Path(args.from_json)
        report = read_report(source)
        if args.docs and source.resolve().parent != docs.parent.resolve():
            raise SystemExit(f"board.py: --docs links the run's JSON from docs/; {source} is not there")
        docs_json, write_json = source.name, False
    else:
        report = asyncio.run(run_board(args))
        Path(args.json).write_text(json.dumps(report, indent=1))
        docs_json, write_json = "board-results.json", True
    table = write_outputs(report, Path(args.json).with_suffix(""), plots=args.docs)
    print(table)
    if args.docs:
        update_docs(report, table, docs, docs_json, write_json=write_json)
    print(f"results: {args.from_json or args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
