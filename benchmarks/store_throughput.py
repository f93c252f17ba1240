"""Store throughput: append (batches of 1 and 64), tail (replay and live) and resume latency with a 10k backlog.

Runs memory, sqlite and redis in one process and one run (it starts its own redis-server on a free loopback port,
without persistence) and prints a table with each figure as a ratio against the in-process ``memory`` store.

    .venv/bin/python benchmarks/store_throughput.py [--events 10000] [--trials 20]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

from respstream.server.store.base import LogEntry, ResponseRecord, Store
from respstream.server.store.memory import MemoryStore
from respstream.server.store.redis import RedisStore
from respstream.server.store.sqlite import SQLiteStore

DELTA = "response.output_text.delta"


def make_entries(total: int) -> list[LogEntry]:
    """A typical delta stream (~180 bytes per event, as the writer encodes it), the last event terminal."""
    out = []
    for seq in range(total):
        kind = "response.completed" if seq == total - 1 else DELTA
        payload = {"type": kind, "sequence_number": seq, "item_id": "msg_0123456789abcdef", "output_index": 0,
                   "content_index": 0, "delta": " token", "logprobs": []}
        out.append(LogEntry(seq, kind, orjson.dumps(payload), seq == total - 1))
    return out


def record() -> ResponseRecord:
    rid = uuid.uuid4().hex
    return ResponseRecord(id=rid, status="in_progress", created_at=time.time(), response={"id": rid})


async def append_all(store: Store, rid: str, log: list[LogEntry], batch: int) -> None:
    for i in range(0, len(log), batch):
        await store.append(rid, log[i : i + batch])


async def drain(store: Store, rid: str, after: int = -1) -> int:
    n = 0
    async for _ in store.tail(rid, after):
        n += 1
    return n


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def measure(store: Store, events: int, trials: int) -> dict[str, float]:
    log = make_entries(events)
    out: dict[str, float] = {}
    for batch in (1, 64):
        rec = record()
        await store.create(rec)
        run = lambda rec=rec, batch=batch: append_all(store, rec.id, log, batch)  # noqa: E731
        out[f"append x{batch}"] = events / await timed(run)

    # Many responses at once (a busy gateway): 100 writers appending one event at a time, concurrently.
    writers = [record() for _ in range(100)]
    for rec in writers:
        await store.create(rec)
    share = log[: events // 100]
    out["append x1, 100 writers"] = (len(share) * 100) / await timed(
        lambda: asyncio.gather(*(append_all(store, rec.id, share, 1) for rec in writers))
    )

    # Replay: tail a finished log from the start.
    rec = record()
    await store.create(rec)
    await append_all(store, rec.id, log, 64)
    out["tail replay"] = events / await timed(lambda: drain(store, rec.id))

    # Live: one reader follows a writer appending batches of 64 (time until the reader has the terminal).
    live = record()
    await store.create(live)

    async def live_run() -> None:
        reader = asyncio.create_task(drain(store, live.id))
        await asyncio.sleep(0)
        await append_all(store, live.id, log, 64)
        assert await reader == events

    out["tail live"] = events / await timed(live_run)

    # Resume with a 10k backlog: time to the first event and to the whole backlog, from starting_after=0.
    firsts, fulls = [], []
    for _ in range(trials):
        start = time.perf_counter()
        stream = store.tail(rec.id, 0)
        await anext(stream)
        firsts.append(time.perf_counter() - start)
        async for _ in stream:
            pass
        fulls.append(time.perf_counter() - start)
    out["resume first ms"] = statistics.median(firsts) * 1000
    out["resume all ms"] = statistics.median(fulls) * 1000
    return out


def start_redis() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (Debian package redis-server; `make system-deps`)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events per log (also the resume backlog)")
    parser.add_argument("--trials", type=int, default=20, help="resume trials (median reported)")
    args = parser.parse_args()
    proc, url = start_redis()
    results: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores: dict[str, Callable[[], Store]] = {
                "memory": lambda: MemoryStore(),
                "sqlite": lambda: SQLiteStore(str(Path(tmp) / "bench.db")),
                "redis": lambda: RedisStore(url, instance_id="bench"),
            }
            for name, factory in stores.items():
                store = factory()
                try:
                    results[name] = await measure(store, args.events, args.trials)
                finally:
                    await store.aclose()
    finally:
        proc.kill()
        proc.wait()

    metrics = list(results["memory"])
    print(f"{args.events} events per log, ~{len(make_entries(2)[0].data)} B each; resume: median of {args.trials}")
    print(f"| metric | {' | '.join(results)} | sqlite / memory | redis / memory |")
    print("|---|" + "---:|" * (len(results) + 2))
    for metric in metrics:
        values = [results[name][metric] for name in results]
        unit = "" if metric.endswith("ms") else " ev/s"
        cells = " | ".join(f"{v:,.2f}" if metric.endswith("ms") else f"{v:,.0f}" for v in values)
        base = results["memory"][metric]
        ratios = " | ".join(f"{results[n][metric] / base:.3g}x" for n in ("sqlite", "redis"))
        print(f"| {metric}{unit} | {cells} | {ratios} |")


if __name__ == "__main__":
    asyncio.run(main())
