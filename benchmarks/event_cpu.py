"""The board's per-event figure alone: server CPU per 1,000 events on 200-delta responses, the Chat Completions bridge
against the floor (and optionally an older source tree), alternating, in one run.

Usage (from the repository root)::

    .venv/bin/python benchmarks/event_cpu.py [--repeat 3] [--requests 1000] [--short-requests 1500] \\
        [--tree OLD_CHECKOUT]

It is benchmarks/board.py's ``cpu_long`` column without the rest of the board: the SIMULATED upstream of
benchmarks/fake_upstreams.py answering ``/long/`` (200 deltas, written in one write a response), the floor (uvicorn +
Starlette writing respstream's own 208 frames captured at the start, one ``send`` a frame) and ``respstream serve``
(the chat bridge, the board's configuration), each a fresh process pinned to core 0 per measurement, in turn, the
order reversed every repeat. ``--tree DIR`` adds ``respstream`` run from another checkout's ``DIR/src`` (e.g. main's,
from ``git archive``) as ``respstream-tree``: a before and after in the same run.

Each system is also loaded with 10-delta responses (16 events; 0 ``--short-requests`` skips it): the two figures
split its CPU into a cost a request and a cost an event (each request costing R + E x its events), which says how
much of the 200-delta figure is per-request work. Prints one line a measurement, the ratios against the floor taken
within each repeat (min / median / max) and the split.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import board_systems
from board import capture_frames, start_upstream
from board_measure import cpu_per_events
from board_systems import SYSTEMS, start_system
from server_throughput import Proc


def _start(name: str, variant: str, upstream: str, tmp: Path, frames: Path, tree: str | None) -> Proc:
    if name != "respstream-tree":
        return start_system(SYSTEMS[name], upstream, variant, tmp, frames)[0]
    # The same process as "respstream" (board_systems puts ROOT/src on PYTHONPATH), from the other checkout.
    saved = board_systems.ROOT
    board_systems.ROOT = Path(str(tree))
    try:
        return start_system(SYSTEMS["respstream"], upstream, variant, tmp, frames)[0]
    finally:
        board_systems.ROOT = saved


def _split(short: dict[str, Any], long: dict[str, Any]) -> tuple[float, float]:
    """(µs a request, µs an event) from one system's two loads: each request costs R + E x its events."""
    per_request = [row["cpu_s"] / row["requests"] * 1e6 for row in (short, long)]
    events = [row["events_per_request"] for row in (short, long)]
    per_event = (per_request[1] - per_request[0]) / (events[1] - events[0])
    return per_request[0] - per_event * events[0], per_event


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000, help="200-delta responses a measurement")
    parser.add_argument("--short-requests", type=int, default=1500,
                        help="10-delta responses a measurement (0: skip the split into request and event costs)")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--time", type=float, default=40.0)
    parser.add_argument("--tree", help="another checkout (a directory holding src/) to run as respstream-tree")
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    tmp = Path(tempfile.mkdtemp(prefix="respstream-event-cpu-"))
    upstream_proc, upstream = start_upstream(tmp)
    frames = tmp / "frames.json"
    names = ["floor", "respstream"] + (["respstream-tree"] if args.tree else [])
    variants = [("long", args.requests)] + ([("normal", args.short_requests)] if args.short_requests else [])
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {(n, v): [] for n in names for v, _ in variants}
    try:
        for variant, file in (("normal", frames), ("long", frames.with_name("frames-long.json"))):
            proc = start_system(SYSTEMS["respstream"], upstream, variant, tmp, frames)[0]
            try:
                file.write_text(json.dumps(await capture_frames(proc.url)))
            finally:
                proc.stop()
        for repeat in range(args.repeat):
            for name in names if repeat % 2 == 0 else list(reversed(names)):
                for variant, requests in variants:
                    proc = _start(name, variant, upstream, tmp, frames, args.tree)
                    try:
                        row = await cpu_per_events(proc.proc.pid, proc.url, {}, "chat", clients=args.clients,
                                                   total=requests, time_limit=args.time)
                    finally:
                        proc.stop()
                    rows[name, variant].append(row)
                    print(f"[{repeat + 1}/{args.repeat}] {name} {variant}: {json.dumps(row)}", flush=True)
    finally:
        upstream_proc.send_signal(signal.SIGTERM)
        upstream_proc.wait(timeout=10)
    floor = [row["cpu_ms_per_1000_events"] for row in rows["floor", "long"]]
    for name in names:
        long = [row["cpu_ms_per_1000_events"] for row in rows[name, "long"]]
        line = f"{name}: CPU ms / 1,000 events on 200-delta responses {long}"
        ratios = [value / base for value, base in zip(long, floor, strict=True) if base]
        if name != "floor" and ratios:  # (none when a tiny load took under a clock tick of the floor's CPU)
            line += (f"; x floor min {min(ratios):.2f} median {statistics.median(ratios):.2f} "
                     f"max {max(ratios):.2f}")
        if args.short_requests:
            split = [_split(s, lg) for s, lg in zip(rows[name, "normal"], rows[name, "long"], strict=True)]
            line += ("; split: µs a request " + ", ".join(f"{r:.0f}" for r, _ in split)
                     + " / µs an event " + ", ".join(f"{e:.2f}" for _, e in split))
        print(line, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
