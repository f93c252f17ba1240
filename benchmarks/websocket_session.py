"""WebSocket mode vs SSE: the gateway's CPU per event for a session of sequential responses with continuations.

Workload, the same for both transports, against one `respstream serve` subprocess (openai dialect, the SIMULATED
scripted upstream, ``scripted:N`` text deltas per response, no delay):
  * ws  — ONE WebSocket; ``--turns`` (20) ``response.create`` messages, each continuing the previous one with
          ``previous_response_id`` (``store: false``: the connection-local store), each read to its terminal;
  * sse — ONE keep-alive HTTP connection; the same ``--turns`` ``POST /v1/responses`` (``stream: true``, stored,
          each continuing the previous one), each read to its terminal.
Measured: the server process's CPU time (utime + stime from /proc/<pid>/stat) across the session, divided by the
events received. Sessions alternate ws/sse ``--repeat`` times; medians are reported with the RATIO ws/sse (goal:
within 20%, i.e. <= 1.2). Loopback only.

Run: ``.venv/bin/python benchmarks/websocket_session.py [--turns 20] [--deltas 400] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_gateway import TERMINALS, continued_turns, free_port, serve
from procstat import cpu_seconds


def ws_session(port: int, turns: int, compression: str | None = "deflate") -> int:
    return continued_turns(port, turns, compression=compression, timeout=30)


def sse_session(client: httpx.Client, port: int, turns: int) -> int:
    events = 0
    previous = None
    for i in range(turns):
        body = {"model": "auto", "input": f"turn {i}", "stream": True}
        if previous:
            body["previous_response_id"] = previous
        with client.stream("POST", f"http://127.0.0.1:{port}/v1/responses", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    events += 1
                    event = json.loads(line[6:])
                    if event["type"] in TERMINALS:
                        previous = event["response"]["id"]
    return events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-compression", action="store_true",
                        help="the WebSocket client does not offer permessage-deflate (default: it does, like browsers)")
    args = parser.parse_args()
    port = free_port()
    with serve(port, f"scripted:{args.deltas}") as proc:
        per_event: dict[str, list[float]] = {"ws": [], "sse": []}
        with httpx.Client(timeout=30) as client:
            ws_session(port, 2)  # warm both paths
            sse_session(client, port, 2)
            for _ in range(args.repeat):
                for name in ("ws", "sse"):
                    before = cpu_seconds(proc.pid)
                    count = (ws_session(port, args.turns, None if args.no_compression else "deflate") if name == "ws"
                             else sse_session(client, port, args.turns))
                    per_event[name].append((cpu_seconds(proc.pid) - before) / count)
        ws_us = statistics.median(per_event["ws"]) * 1e6
        sse_us = statistics.median(per_event["sse"]) * 1e6
        print(f"{args.turns} sequential responses with continuations, {args.deltas} deltas each, "
              f"median of {args.repeat}")
        print(f"server CPU per event: websocket {ws_us:.2f} us, sse {sse_us:.2f} us")
        print(f"RATIO websocket/sse = {ws_us / sse_us:.3f} (goal <= 1.20)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
