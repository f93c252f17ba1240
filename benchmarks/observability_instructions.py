"""What metrics and tracing cost, counted in CPU instructions: immune to the machine's load, unlike time.

Usage (from the repository root; needs Debian ``valgrind``)::

    .venv/bin/python benchmarks/observability_instructions.py [--responses 48] [--configs off,metrics,traces]

For each telemetry configuration the gateway app runs in-process (``create_app``, the SIMULATED ``scripted:200``
backend, the memory store) and serves responses of 208 events through httpx's ASGI transport, four at a time,
under ``valgrind --tool=callgrind``, which counts every instruction executed (all threads: the span exporter's too).
Each configuration runs twice, with 8 and with ``--responses`` + 8 responses; the difference divided by
``--responses`` is the cost of one response, start-up and imports cancelled out (each run first makes one request
with a sampled ``traceparent``, so the exporter's first export is in both). The traced configurations export
to a SIMULATED collector (a receiver that reads and drops each export) with ``OTEL_BSP_SCHEDULE_DELAY`` long enough
that spans go out in full batches of 512 at shutdown, as they do under load (valgrind is ~50x slower, so the usual
0.5 s schedule would send a few spans per request and overstate the export's HTTP cost).

Peer: the same app with telemetry off, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from observability_overhead import RECEIVER
from server_throughput import VENV_BIN, free_port

DRIVER = r"""
import asyncio, json, sys
import httpx
from respstream.server.http.app import create_app
from respstream.server.config import Config

async def main(telemetry, n):
    app = create_app(Config(upstreams=["scripted:200"], telemetry=telemetry, logging={"access_log": False}))
    inbox, outbox = asyncio.Queue(), asyncio.Queue()
    async def receive(): return await inbox.get()
    async def send(message): await outbox.put(message)
    await inbox.put({"type": "lifespan.startup"})
    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send))
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
    body = {"input": "hello", "stream": True}
    # One request every run makes first, sampled whatever the ratio (a client's sampled traceparent is followed):
    # the exporter's one-time set-up (its first HTTP connection) then lands in the short run and the long run alike,
    # not only in whichever of them happens to sample a response.
    warm = await client.post("/v1/responses", json=body,
                             headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    assert warm.status_code == 200
    for _ in range(n // 4):
        replies = await asyncio.gather(*(client.post("/v1/responses", json=body) for _ in range(4)))
        for reply in replies:
            assert reply.status_code == 200 and reply.text.count("\ndata: ") == 208, reply.text[:300]
    await inbox.put({"type": "lifespan.shutdown"})  # flushes the span exporter
    await outbox.get()
    await life

asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2])))
"""

CONFIGS = {
    "off": {"metrics": False, "traces": "false"},
    "metrics": {"metrics": True, "traces": "false"},
    "traces": {"metrics": True, "traces": "true"},
    "traces@0.1": {"metrics": True, "traces": "true", "trace_sample_ratio": 0.1},
    "traces@0": {"metrics": True, "traces": "true", "trace_sample_ratio": 0.0},
}
WARM = 8


def instructions(driver: Path, telemetry: dict[str, object], responses: int) -> int:
    env = {**os.environ, "PYTHONMALLOC": "malloc", "OTEL_BSP_SCHEDULE_DELAY": "600000"}
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          str(VENV_BIN / "python"), str(driver), json.dumps(telemetry), str(responses)],
                         capture_output=True, text=True, env=env, timeout=1800)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or not found:
        raise RuntimeError(f"driver failed ({run.returncode}): {run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", type=int, default=48, help="responses measured per configuration (x4)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    names = [n for n in args.configs.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or "off" not in names:
        print(f"--configs: known {', '.join(CONFIGS)} and 'off' is required (got {args.configs})", file=sys.stderr)
        return 2
    port = free_port()
    collector = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)])
    time.sleep(0.5)
    per_response: dict[str, float] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            driver = Path(tmp) / "driver.py"
            driver.write_text(DRIVER)
            jobs = []
            with ThreadPoolExecutor(args.jobs) as pool:
                for name in names:
                    telemetry = dict(CONFIGS[name])
                    if telemetry["traces"] == "true":
                        telemetry["otlp_endpoint"] = f"http://127.0.0.1:{port}"
                    jobs.append((name, pool.submit(instructions, driver, telemetry, WARM),
                                 pool.submit(instructions, driver, telemetry, WARM + args.responses)))
                for name, short, long in jobs:
                    per_response[name] = (long.result() - short.result()) / args.responses
                    print(f"{name:12} {per_response[name] / 1e6:8.3f} M instructions per response", flush=True)
    finally:
        collector.terminate()
        collector.wait()
    base = per_response["off"]
    print(f"\ninstructions per response of 208 events, {args.responses} responses per configuration:")
    print(f"{'telemetry':12} {'M instr.':>9} {'vs off':>8}")
    for name, value in per_response.items():
        print(f"{name:12} {value / 1e6:9.3f} {value / base:8.3f}x")
    if "traces" in per_response and "traces@0" in per_response:
        # Which responses a ratio samples is random (binomial), so a measured traces@0.1 moves from run to run;
        # its expectation follows from the two deterministic ends: r * all sampled + (1 - r) * none sampled.
        sampled, unsampled = per_response["traces"], per_response["traces@0"]
        for ratio in (0.1, 0.01):
            expected = ratio * sampled + (1 - ratio) * unsampled
            print(f"expected at ratio {ratio}: {expected / 1e6:.3f} M, {expected / base:.3f}x of off "
                  f"(from traces and traces@0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
