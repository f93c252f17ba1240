"""The upstream hop counted in CPU instructions: the real server, scripted backend vs a Chat Completions upstream.

Usage (from the repository root; needs Debian ``valgrind``)::

    .venv/bin/python benchmarks/hop_instructions.py [--responses 100] [--concurrency 20] [--tree SRC]

``benchmarks/server_throughput.py`` measures the same two servers in CPU time, which on this shared 2-core machine
moves by 10-20% from one minute to the next. Here each server (``respstream serve`` on its default stack, uvloop +
httptools) runs under ``valgrind --tool=callgrind``, which counts every user-space instruction it executes; the
load generator and the SIMULATED Chat Completions server (tests/fakes/chat_server.py, 200 content chunks, the same
as server_throughput's ``gateway-http``) run outside it. Each server runs twice, serving 20 warm-up responses and
then 0 or ``--responses`` more; the difference divided by ``--responses`` is one response, start-up cancelled out.
The periodic upstream probe is off (``upstream_probe_seconds = 0``): it is time-based, and valgrind's ~50x slowdown
would put several probes into the longer run.

Peer: the same gateway with the SIMULATED in-process ``scripted:200`` backend (208 events a response, as the
upstream's 200 chunks make 209), in the same run. What instructions leave out: the kernel (socket reads and writes;
the upstream's ~130 TCP segments a response cost the gateway ~0.8 µs of system time an event, measured separately)
and how fast the instructions run (the hop's copies and allocations run at a lower rate), so the CPU-time ratio of
``server_throughput.py`` is the goal's figure and this one says where the user-space work went.

``--tree SRC``: also count a second source tree (e.g. an older commit's ``src`` from ``git archive``) for a before
and after in the same run.

``--per-read`` (with ``--responses 20 --concurrency 2``): what one upstream *read* costs. At full speed valgrind's
slowdown merges the upstream's writes into a few large reads, which hides the cost paid once a read (the wake-ups,
the hand-offs, the send to the client), the cost that a real model's one or few tokens a read pays every time. Here
two paced upstreams write the same 203 chunks 5 and 40 a write, 25 ms apart (every write one read); the difference of
the two counts over the 35 reads between them is one read. A third writes them one a write (a real model's shape,
one token a read): its count an event is what a deployment in front of a real model pays (a response takes ~5 s
there: the mode takes a few minutes a tree).

``--burst N``: the upstream writes the same bytes N chunks at a time (``--burst 26``: ~9 HTTP chunks and TCP segments a
response instead of ~210, and fewer, larger reads). The two counts bracket the hop: the per-chunk framing and the
extra reads are in ``--burst 1``'s, not in ``--burst 26``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import run_load
from server_throughput import BODY, DELTAS, ROOT, VENV_BIN, free_port

PACE_MS = 25.0  # --per-read: between the upstream's writes (valgrind's ~50x slower read of one takes a few ms)


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def count(spec: str, responses: int, concurrency: int, config: Path, tree: str | None) -> int:
    """Instructions the server executes to start, serve 20 warm-up responses and ``responses`` more, and stop."""
    port = free_port()
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", str(VENV_BIN / "python"), "-m",
            "respstream", "serve", "--port", str(port), "--upstream", spec, "--config", str(config)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    try:
        wait_port(port, proc)
        url = f"http://127.0.0.1:{port}/v1/responses"
        for total in (20, responses):
            if total:
                result = asyncio.run(run_load(url, BODY, concurrency=concurrency, total=total, time_limit=900,
                                              timeout=900))
                if result.ok != total:
                    raise RuntimeError(f"{spec}: {result.ok} of {total} responses completed: {result.errors}")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    found = re.search(rb"Collected : (\d+)", err)
    if not found:
        raise RuntimeError(f"no callgrind total for {spec}: {err.decode()[-1000:]}")
    return int(found.group(1))


def start_upstream(tmp: str, name: str, burst: int, pace_ms: float = 0) -> tuple[subprocess.Popen[bytes], str]:
    """The SIMULATED Chat Completions upstream (server_throughput.py's) and its base URL."""
    port_file = Path(tmp) / f"{name}.port"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("server_throughput.py")), "--serve",
                             "fake-upstream", "--frames", str(port_file), "--burst", str(burst), "--pace-ms",
                             str(pace_ms)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the SIMULATED upstream did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


def per_read(args: argparse.Namespace, config: Path, tmp: str, trees: list[tuple[str, str | None]]) -> None:
    """Instructions per upstream read: the same 203 chunks in 41 writes (5 a write) and in 6 (40 a write), 25 ms
    apart, so that every write is one read of the gateway even under valgrind; the difference of the two counts
    over the 35 reads between them is what one read costs, whatever it carries (the chunks are the same). And the
    same chunks one a write (203 reads), a real model's shape: instructions an event (208 a response) there."""
    writes = {burst: -(-(DELTAS + 3) // burst) for burst in (1, 5, 40)}
    upstreams = {burst: start_upstream(tmp, f"paced{burst}", burst, PACE_MS) for burst in writes}
    try:
        print(f"instructions per upstream read ({args.responses} responses after 20, {args.concurrency} at once, "
              f"writes {PACE_MS:g} ms apart):")
        for label, tree in trees:
            per = {}
            for burst, (_, url) in upstreams.items():
                base = count(url, 0, args.concurrency, config, tree)
                per[burst] = (count(url, args.responses, args.concurrency, config, tree) - base) / args.responses
                chunks = f"{burst} chunk{'s' if burst > 1 else ''}"
                print(f"  {label}: {chunks} a write ({writes[burst]} reads): {per[burst] / 1e3:,.0f} k "
                      "a response")
            print(f"  {label}: one upstream read: {(per[5] - per[40]) / (writes[5] - writes[40]) / 1e3:,.1f} k")
            print(f"  {label}: a real model's shape, one token a read: {per[1] / (DELTAS + 8) / 1e3:,.1f} k an event")
    finally:
        for proc, _ in upstreams.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--tree", help="a second source tree to count as well (its src directory)")
    parser.add_argument("--burst", type=int, default=1,
                        help="the upstream writes this many chunks at a time (26: the reads of a full-speed run)")
    parser.add_argument("--per-read", action="store_true",
                        help="count what one upstream read costs (paced upstreams; use --responses 20 "
                             "--concurrency 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        config.write_text("upstream_probe_seconds = 0\n")
        trees: list[tuple[str, str | None]] = [("this tree", None)]
        if args.tree:
            trees.append((args.tree, args.tree))
        if args.per_read:
            per_read(args, config, tmp, trees)
            return
        upstream, http = start_upstream(tmp, "upstream", args.burst)
        try:
            print(f"instructions per response ({args.responses} responses after 20, {args.concurrency} at once):")
            for label, tree in trees:
                per = {}
                for name, spec in (("gateway (scripted:200)", "scripted:200"), ("gateway-http", http)):
                    base = count(spec, 0, args.concurrency, config, tree)
                    more = count(spec, args.responses, args.concurrency, config, tree)
                    per[name] = (more - base) / args.responses
                    print(f"  {label}: {name}: {per[name] / 1e3:,.0f} k")
                scripted, hop = per["gateway (scripted:200)"], per["gateway-http"]
                print(f"  {label}: gateway-http / gateway instructions per event: "
                      f"{(hop / 209) / (scripted / 208):.2f} (the hop: {(hop - scripted) / 1e3:,.0f} k a response)")
        finally:
            upstream.send_signal(signal.SIGTERM)
            upstream.wait(timeout=30)


if __name__ == "__main__":
    main()
