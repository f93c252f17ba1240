"""Added latency and server CPU per request of two (or more) source trees of the gateway, side by side in one run.

Usage (from the repository root)::

    git archive main src | (mkdir -p /tmp/main && tar -x -C /tmp/main)
    .venv/bin/python benchmarks/request_latency_trees.py /tmp/main/src src --rounds 2000

The SIMULATED upstream (benchmarks/fake_upstreams.py, 10 deltas) and this client run on core 1, every gateway
(``respstream serve --upstream chat+...``, one per tree) on core 0. One client makes ``rounds`` rounds; a round is a
streaming request to the direct upstream and to every gateway, in an order that rotates each round
(benchmarks/added_latency.py), so a change in the shared machine's load hits every tree alike. Printed per tree: its
added latency (its percentile minus the direct upstream's) to the first event and the last byte, and the server's
CPU (user + system, from proc(5)) per request over the measured rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from added_latency import Target, added, measure

HERE = Path(__file__).resolve().parent
BODY = b'{"model": "fake-model", "input": "hello", "stream": true}'
DIRECT_BODY = b'{"model": "fake-model", "stream": true, "messages": [{"role": "user", "content": "hello"}]}'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {port}") from None
            time.sleep(0.2)


def run(trees: list[str], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port_file, config = Path(tmp) / "port", Path(tmp) / "gateway.toml"
        config.write_text("upstream_probe_seconds = 0\n")
        upstream = subprocess.Popen(["taskset", "-c", "1", sys.executable, str(HERE / "fake_upstreams.py"),
                                     "--port-file", str(port_file)])
        gateways: list[tuple[str, int, subprocess.Popen[bytes]]] = []
        try:
            while not port_file.exists() or not port_file.read_text().strip():
                time.sleep(0.1)
            base = f"http://127.0.0.1:{int(port_file.read_text())}/v1"
            for tree in trees:
                port = _free_port()
                gateways.append((tree, port, subprocess.Popen(
                    ["taskset", "-c", "0", sys.executable, "-m", "respstream", "serve", "--port", str(port),
                     "--upstream", "chat+" + base, "--config", str(config)],
                    env={**os.environ, "PYTHONPATH": str(Path(tree).resolve())}, cwd=tmp,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
            for _, port, _ in gateways:
                _wait_port(port)
            os.sched_setaffinity(0, {1})
            targets = [Target("direct", f"{base}/chat/completions", DIRECT_BODY)]
            targets += [Target(tree, f"http://127.0.0.1:{port}/v1/responses", BODY) for tree, port, _ in gateways]
            asyncio.run(measure(targets, clients=1, rounds=100, time_limit=60))  # warm-up: imports, pools
            before = [_cpu_seconds(p.pid) for _, _, p in gateways]
            measured = asyncio.run(measure(targets, clients=1, rounds=rounds, time_limit=900))
            after = [_cpu_seconds(p.pid) for _, _, p in gateways]
            for (tree, _, _), start, end in zip(gateways, before, after, strict=True):
                last, first = added(measured, tree, "direct", "last_byte"), added(measured, tree, "direct",
                                                                                  "first_event")
                print(f"{tree}: CPU {(end - start) / max(1, len(measured.timings[tree])) * 1000:.3f} ms a request; "
                      f"added to the last byte p50 {last['added_p50_ms']:.3f} ms p99 {last['added_p99_ms']:.3f} ms; "
                      f"to the first event p50 {first['added_p50_ms']:.3f} ms; errors {measured.errors(tree)}")
            print(f"load average {os.getloadavg()}")
        finally:
            for _, _, process in gateways:
                process.terminate()
            upstream.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("trees", nargs="+", help="source trees (their src directories)")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    run(args.trees, args.rounds)


if __name__ == "__main__":
    main()
