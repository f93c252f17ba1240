"""What metrics and tracing cost: the gateway's events/s at 100 streams with telemetry off, metrics only, and
metrics + OpenTelemetry traces exported over OTLP/HTTP, in one run.

Usage (from the repository root)::

    .venv/bin/python benchmarks/observability_overhead.py [--concurrency 100] [--slices 12] [--time 1.5]

Each gateway is ``respstream serve --upstream scripted:200`` (the SIMULATED in-process backend, no delay) in its own
process pinned to core 0, with a config file that sets ``[telemetry]``. The load generator (benchmarks/loadgen.py)
runs here, pinned to core 1. For the traced run a SIMULATED collector (a tiny OTLP/HTTP receiver that reads and drops
each export, in its own process on core 1) takes the spans, so the export's HTTP work is real. The three
configurations run in turn, ``--repeat`` times (a change in the machine's load hits each alike); the median events/s
of each is compared with the "off" one. The goal (issue "Observability"): metrics + tracing cost < 5% of events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import run_load
from procstat import cpu_seconds
from server_throughput import DELTAS, VENV_BIN, Proc, free_port, pinned

BODY = b'{"input": "hello", "stream": true}'
EXPECTED_EVENTS = DELTAS + 8  # created, routing, item added, part added, deltas, text done, part done, item done, done

RECEIVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

CONFIGS = {
    "off": {"metrics": False, "traces": "false"},
    # The control: a second gateway exactly like "off". How far it lands from "off" is this run's noise floor.
    "off (control)": {"metrics": False, "traces": "false"},
    "metrics": {"metrics": True, "traces": "false"},
    "metrics+traces": {"metrics": True, "traces": "true"},
    "metrics+traces@0.1": {"metrics": True, "traces": "true", "trace_sample_ratio": 0.1},
}


def start_gateway(name: str, folder: Path, collector: str) -> Proc:
    telemetry = dict(CONFIGS[name])
    if telemetry["traces"] == "true":
        telemetry["otlp_endpoint"] = collector
    config = folder / f"gateway-{list(CONFIGS).index(name)}.json"
    config.write_text(json.dumps({"telemetry": telemetry, "logging": {"access_log": False}}))
    port = free_port()
    argv = [str(VENV_BIN / "respstream"), "serve", "--port", str(port), "--upstream", f"scripted:{DELTAS}",
            "--config", str(config)]
    return Proc(argv, port)


async def slice_(proc: Proc, concurrency: int, time_limit: float) -> tuple[float, float]:
    """One slice of load: (events/s, server CPU microseconds per event)."""
    cpu_before = cpu_seconds(proc.proc.pid)
    result = await run_load(proc.url, BODY, concurrency=concurrency, total=100 * concurrency,
                            time_limit=time_limit, timeout=60.0, expected_events=EXPECTED_EVENTS)
    if result.errors:
        raise RuntimeError(f"load errors: {dict(result.errors)}")
    await asyncio.sleep(0.6)  # the span exporter's batch of this slice goes out (every 0.5 s): its CPU counts too
    cpu = cpu_seconds(proc.proc.pid) - cpu_before
    return result.events_per_s, cpu / max(1, result.events) * 1e6


async def run(procs: dict[str, Proc], concurrency: int, slices: int, seconds: float,
              results: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    for proc in procs.values():  # warm-up
        await run_load(proc.url, BODY, concurrency=concurrency, total=concurrency * 2, time_limit=5.0, timeout=60.0,
                       expected_events=EXPECTED_EVENTS)
    for n in range(slices):
        # All gateways stay up (an idle one costs nothing) and take the load in turn, a short slice each, in a
        # rotating order: a change in the machine's load lands on every configuration alike.
        names = list(procs)
        names = names[n % len(names):] + names[:n % len(names)]
        for name in names:
            rate, us_per_event = await slice_(procs[name], concurrency, seconds)
            results[name].append(rate)
            cpu[name].append(us_per_event)
        print(f"slice {n + 1}: " + "  ".join(f"{name} {cpu[name][-1]:.2f}" for name in procs) + " us CPU/event",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--slices", type=int, default=12, help="slices of load per configuration")
    parser.add_argument("--time", type=float, default=1.5, help="seconds of load per slice")
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    collector_port = free_port()
    collector = subprocess.Popen(pinned(1, [sys.executable, "-c", RECEIVER, str(collector_port)]))
    time.sleep(0.5)
    results: dict[str, list[float]] = {name: [] for name in CONFIGS}
    cpu: dict[str, list[float]] = {name: [] for name in CONFIGS}
    procs: dict[str, Proc] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in CONFIGS:
                procs[name] = start_gateway(name, Path(tmp), f"http://127.0.0.1:{collector_port}")
            asyncio.run(run(procs, args.concurrency, args.slices, args.time, results, cpu))
    finally:
        for proc in procs.values():
            proc.stop()
        collector.terminate()
        collector.wait()
    base = statistics.median(results["off"])
    base_cpu = statistics.median(cpu["off"])
    print(f"\n{args.concurrency} streams of {EXPECTED_EVENTS} events, median of {args.slices} slices:")
    print(f"{'telemetry':18} {'events/s':>10} {'vs off':>8} {'CPU us/event':>13} {'vs off':>8}")
    for name, rates in results.items():
        median, median_cpu = statistics.median(rates), statistics.median(cpu[name])
        print(f"{name:18} {median:10,.0f} {median / base:8.3f}x {median_cpu:13.2f} {median_cpu / base_cpu:8.3f}x")
    control = statistics.median(cpu["off (control)"]) / base_cpu
    print(f"\nnoise floor: the control gateway (same as off) measured {control:.3f}x CPU per event and "
          f"{statistics.median(results['off (control)']) / base:.3f}x events/s of off")
    for name in ("metrics+traces", "metrics+traces@0.1"):
        full = statistics.median(results[name]) / base
        full_cpu = statistics.median(cpu[name]) / base_cpu
        print(f"\n{name}: events/s {full:.3f}x of off; server CPU per event {full_cpu:.3f}x of off "
              f"(goal: cost < 5%, i.e. >= 0.95x events/s and <= 1.05x CPU per event)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
