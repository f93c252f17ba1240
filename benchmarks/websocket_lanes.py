"""16 ``stream_id`` lanes on ONE WebSocket vs 16 WebSockets: the gateway's CPU per event and its memory.

Workload, the same for both sides, against one `respstream serve` subprocess (openai dialect, the SIMULATED scripted
upstream, ``scripted:N`` text deltas per response, no delay):
  * lanes   — ONE WebSocket; ``--streams`` (16) lanes, each running ``--rounds`` responses one after another (each
              continuing the lane's previous one, ``store: false``), all lanes at once, events interleaved;
  * sockets — ``--streams`` WebSockets (a client thread each), each running the same ``--rounds`` responses.
Measured: the server process's CPU time (utime + stime, /proc/<pid>/stat) over the run divided by the events
received, and its resident memory after the run (VmRSS) and its peak (VmHWM, over the whole process life, so it
only ever grows: read it as "the most either side needed so far"). The sides alternate ``--repeat`` times; medians and
the RATIO lanes/sockets are reported (goal: lanes cost no more than sockets, <= 1.0). Loopback only.

Steering latency (``--steer N``, instead): against a second server whose scripted upstream writes a delta every 10 ms,
N times: a response starts, after its first delta a ``response.steer`` goes out; reported are the medians of steer
sent -> the original's ``steered`` terminal, and -> the successor's first delta.

Run: ``.venv/bin/python benchmarks/websocket_lanes.py [--streams 16] [--rounds 5] [--deltas 200] [--repeat 5]``,
``.venv/bin/python benchmarks/websocket_lanes.py --steer 20``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_gateway import TERMINALS, continued_turns, free_port, serve
from procstat import cpu_seconds


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def create(lane: str | None, turn: int, previous: str | None) -> str:
    body: dict[str, Any] = {"type": "response.create", "model": "auto", "store": False, "input": f"turn {turn}"}
    if lane is not None:
        body["stream_id"] = lane
    if previous:
        body["previous_response_id"] = previous
    return json.dumps(body)


def lanes_run(port: int, streams: int, rounds: int) -> int:
    """One socket, ``streams`` lanes; each lane sends its next create when its previous response ended."""
    events = 0
    left = dict.fromkeys((f"lane{i}" for i in range(streams)), rounds)
    with connect(f"ws://127.0.0.1:{port}/v1/responses", max_size=None, compression=None) as ws:
        for lane in left:
            ws.send(create(lane, 0, None))
        while left:
            event = json.loads(ws.recv(timeout=60))
            events += 1
            if event["type"] in TERMINALS:
                lane = event["stream_id"]
                left[lane] -= 1
                if left[lane]:
                    ws.send(create(lane, rounds - left[lane], event["response"]["id"]))
                else:
                    del left[lane]
    return events


def one_socket(port: int, rounds: int, counts: list[int]) -> None:
    counts.append(continued_turns(port, rounds, compression=None, timeout=60))


def sockets_run(port: int, streams: int, rounds: int) -> int:
    counts: list[int] = []
    threads = [threading.Thread(target=one_socket, args=(port, rounds, counts)) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(counts) != streams:
        raise SystemExit("a socket failed")
    return sum(counts)


def steering(port: int, samples: int) -> None:
    steered: list[float] = []
    first_delta: list[float] = []
    with connect(f"ws://127.0.0.1:{port}/v1/responses", max_size=None, compression=None) as ws:
        for i in range(samples):
            ws.send(create("main", i, None))
            rid = None
            while True:
                event = json.loads(ws.recv(timeout=60))
                rid = event["response"]["id"] if event["type"] == "response.created" else rid
                if event["type"] == "response.output_text.delta":
                    break
            t0 = time.perf_counter()
            ws.send(json.dumps({"type": "response.steer", "previous_response_id": rid, "input": "change course"}))
            ended = None
            while True:
                event = json.loads(ws.recv(timeout=60))
                if event["type"] == "response.incomplete":
                    ended = time.perf_counter() - t0
                elif event["type"] == "response.output_text.delta" and ended is not None and len(steered) == i:
                    steered.append(ended)  # the successor's first delta (the rest of its stream is read below)
                    first_delta.append(time.perf_counter() - t0)
                elif event["type"] == "response.completed" and ended is not None:
                    break
    print(f"steering, median of {samples}: steer -> steered terminal {statistics.median(steered) * 1e3:.2f} ms, "
          f"-> successor's first delta {statistics.median(first_delta) * 1e3:.2f} ms "
          f"(the upstream writes a delta every 10 ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steer", type=int, default=0, help="measure steering latency this many times instead")
    args = parser.parse_args()
    port = free_port()
    if args.steer:
        with serve(port, "scripted:100?delay_ms=10"):
            steering(port, args.steer)
        return 0
    with serve(port, f"scripted:{args.deltas}") as proc:
        lanes_run(port, 2, 1)  # warm both paths
        sockets_run(port, 2, 1)
        per_event: dict[str, list[float]] = {"lanes": [], "sockets": []}
        rss: dict[str, list[int]] = {"lanes": [], "sockets": []}
        for i in range(args.repeat):
            order = ("lanes", "sockets") if i % 2 == 0 else ("sockets", "lanes")  # alternate who goes first
            for name in order:
                before = cpu_seconds(proc.pid)
                run = lanes_run if name == "lanes" else sockets_run
                count = run(port, args.streams, args.rounds)
                per_event[name].append((cpu_seconds(proc.pid) - before) / count)
                rss[name].append(rss_kib(proc.pid)[0])
        lanes_us = statistics.median(per_event["lanes"]) * 1e6
        sockets_us = statistics.median(per_event["sockets"]) * 1e6
        print(f"{args.streams} streams x {args.rounds} responses x {args.deltas} deltas, median of {args.repeat}")
        print(f"server CPU per event: lanes {lanes_us:.2f} us, sockets {sockets_us:.2f} us")
        print(f"RATIO lanes/sockets = {lanes_us / sockets_us:.3f} (goal <= 1.0)")
        print(f"server RSS after a run (median): lanes {statistics.median(rss['lanes']) / 1024:.1f} MiB, "
              f"sockets {statistics.median(rss['sockets']) / 1024:.1f} MiB; peak {rss_kib(proc.pid)[1] / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
