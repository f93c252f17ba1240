"""Instructions per request (valgrind's callgrind): one streaming ``POST /v1/responses`` at a time through the gateway
in front of board's SIMULATED upstream (benchmarks/fake_upstreams.py, 10 deltas), for each upstream kind and tree.

Usage (from the repository root; needs Debian ``valgrind``)::

    .venv/bin/python benchmarks/request_instructions.py [--requests 200] [--tree /tmp/old/src] \\
        [--upstreams chat+,responses+]

Why instructions: on this shared 2-core machine CPU time per request moves by tens of percent with the other jobs'
load; callgrind counts the user-space instructions the gateway executes, which that load cannot change. The gateway
starts with instrumentation off (``--instr-atstart=no``), serves ``--warmup`` requests (imports, first-request
caches, the upstream connection pool filled), then ``callgrind_control -i on`` counts exactly ``--requests``
sequential requests (one client, a new connection each, as benchmarks/added_latency.py does), and ``-i off``. The
kernel's share (socket calls, wake-ups) is not counted; it is the same for every tree.

``--tree SRC``: also count a second source tree (e.g. ``git archive`` of main's ``src``) for a before/after.
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
from added_latency import Target, fetch
from fake_upstreams import start_upstream

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
BODY = b'{"model": "fake-model", "input": "hello", "stream": true}'


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _requests(url: str, count: int) -> None:
    target = Target("gateway", url, BODY)
    for _ in range(count):
        timing = await fetch(target, timeout=120)
        if timing.error:
            raise RuntimeError(f"{url}: a request failed under valgrind: {timing.error}")


async def count(spec: str, tree: str | None, requests: int, warmup: int, config: Path) -> int:
    """Instructions the gateway (``--upstream spec``) executes for ``requests`` sequential streaming requests."""
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = tree or str(ROOT / "src")
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
            str(VENV_BIN / "python"), "-m", "respstream", "serve", "--port", str(port), "--upstream", spec,
            "--config", str(config)]
    # stderr into a file, not a pipe: the gateway logs a line a request, and a pipe nobody reads until the end
    # fills at 64 KiB (~100 requests), blocking the gateway mid-run (seen as a client timeout).
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=tempfile.gettempdir())
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    errors.seek(0)
                    said = errors.read().decode(errors="replace")[-1500:]
                    raise RuntimeError(f"the gateway did not start: {said}")
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                except OSError:
                    await asyncio.sleep(0.2)
            url = f"http://127.0.0.1:{port}/v1/responses"
            await _requests(url, warmup)
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
            await _requests(url, requests)
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 300)
            errors.seek(0)
            err = errors.read()
    found = re.search(rb"Collected : (\d+)", err)
    if not found:
        raise RuntimeError(f"no callgrind total for {spec}: {err.decode()[-1000:]}")
    return int(found.group(1))


async def run(args: argparse.Namespace) -> None:
    upstream = await start_upstream(args.deltas)
    base = f"http://127.0.0.1:{upstream.sockets[0].getsockname()[1]}/v1"
    trees: list[tuple[str, str | None]] = [("this tree", None)] + ([(args.tree, args.tree)] if args.tree else [])
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        config.write_text("upstream_probe_seconds = 0\n")
        print(f"instructions per streaming request ({args.requests} after {args.warmup}, one at a time, "
              f"{args.deltas} deltas):", flush=True)
        for kind in args.upstreams.split(","):
            for label, tree in trees:
                total = await count(kind + base, tree, args.requests, args.warmup, config)
                print(f"  {kind.rstrip('+')} upstream, {label}: {total / args.requests / 1e3:,.0f} k a request",
                      flush=True)
    upstream.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--deltas", type=int, default=10)
    parser.add_argument("--upstreams", default="chat+,responses+", help="upstream spec prefixes to count")
    parser.add_argument("--tree", help="a second source tree (its src directory) to count as well")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
