"""Added latency per request: each system against the direct upstream, interleaved, over raw asyncio sockets.

Usage (from the repository root; the upstream and the gateways must be running)::

    .venv/bin/python benchmarks/added_latency.py --target direct=http://127.0.0.1:P/v1/chat/completions \\
        --target respstream=http://127.0.0.1:Q/v1/responses --clients 1 --rounds 500

Each of ``clients`` workers makes ``rounds`` rounds; a round is one request to every target, in an order that
rotates each round (so a change in the shared machine's load hits every target alike). Per request: the time to
the first response byte, the time to the first SSE event (streaming), and to the last byte (the chunked body's last
chunk, or ``content-length`` bytes). A new connection per request on every target (``Connection: close``), so no
target profits from a warm connection the others lack. Added latency = a system's percentile minus the direct
upstream's percentile, both from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from loadgen import exchange  # (the same folder)
from loadgen import percentile as nearest_rank

__all__ = ["Target", "Timing", "added", "fetch", "measure", "percentile"]


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    method: str = "POST"

    def request(self) -> tuple[str, int, bytes]:
        parts = urlsplit(self.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        lines = [f"{self.method} {target or '/'} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
                 "Accept: text/event-stream, application/json", f"Content-Length: {len(self.body)}",
                 "Connection: close", *(f"{k}: {v}" for k, v in self.headers)]
        return host, port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


@dataclass(slots=True)
class Timing:
    """One request, in seconds from the request written; ``error`` None when it completed."""

    first_byte: float = 0.0
    first_event: float = 0.0
    last_byte: float = 0.0
    status: int = 0
    error: str | None = None
    body: bytes = b""


class _Client(asyncio.Protocol):
    def __init__(self, request: bytes, done: asyncio.Future[None], keep_body: bool) -> None:
        self.request = request
        self.done = done
        self.keep_body = keep_body
        self.timing = Timing()
        self.started = 0.0
        self.data = bytearray()
        self.head_end = -1
        self.length: int | None = None  # content-length, or None for chunked / until EOF
        self.chunked = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.started = time.perf_counter()
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter() - self.started
        timing = self.timing
        if not self.data:
            timing.first_byte = now
        self.data += data
        if self.head_end < 0:
            self.head_end = self.data.find(b"\r\n\r\n")
            if self.head_end < 0:
                return
            head = bytes(self.data[: self.head_end]).decode("latin-1").lower()
            timing.status = int(head[9:12]) if head[9:12].isdigit() else 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name == "content-length":
                    self.length = int(value)
                elif name == "transfer-encoding" and "chunked" in value:
                    self.chunked = True
        body_at = self.head_end + 4
        if not timing.first_event and self.data.find(b"data:", body_at) >= 0:
            timing.first_event = now
        if (self.chunked and self.data.endswith(b"0\r\n\r\n")) or (
                self.length is not None and len(self.data) - body_at >= self.length):
            timing.last_byte = now
            if not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.timing.last_byte = time.perf_counter() - self.started
            self.timing.error = "cut" if exc is None else f"reset:{type(exc).__name__}"
            self.done.set_result(None)


async def fetch(target: Target, *, timeout: float = 30.0, keep_body: bool = False) -> Timing:
    """One request to ``target``; never raises (failures are ``timing.error``)."""
    host, port, request = target.request()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    client = _Client(request, done, keep_body)
    timing = client.timing
    timing.error = await exchange(host, port, client, done, timeout) or timing.error
    if timing.error is None and timing.status != 200:
        timing.error = f"status:{timing.status}"
    if keep_body:
        timing.body = bytes(client.data[client.head_end + 4 :]) if client.head_end >= 0 else bytes(client.data)
    return timing


@dataclass
class Measured:
    timings: dict[str, list[Timing]] = field(default_factory=dict)
    elapsed: float = 0.0

    def errors(self, name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.timings.get(name, []):
            if t.error:
                out[t.error] = out.get(t.error, 0) + 1
        return out


async def measure(targets: list[Target], *, clients: int, rounds: int, time_limit: float = 120.0,
                  between: Callable[[], None] | None = None) -> Measured:
    """``clients`` workers, each ``rounds`` rounds over every target (rotating order), bounded by ``time_limit``."""
    out = Measured({t.name: [] for t in targets})
    stop_at = time.perf_counter() + time_limit
    started = time.perf_counter()

    async def worker(offset: int) -> None:
        for round_ in range(rounds):
            if time.perf_counter() > stop_at:
                return
            shift = (round_ + offset) % len(targets)
            for target in targets[shift:] + targets[:shift]:
                out.timings[target.name].append(await fetch(target))
            if between is not None:
                between()

    await asyncio.gather(*(worker(i) for i in range(clients)))
    out.elapsed = time.perf_counter() - started
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank ``q``-th percentile (0..100); nan for no values."""
    return nearest_rank(values, q, empty=float("nan"))


def added(measured: Measured, name: str, direct: str, what: str = "last_byte") -> dict[str, float]:
    """p50/p99 of ``name`` and of ``direct`` (ms, completed requests only) and their differences."""
    def values(of: str) -> list[float]:
        return [getattr(t, what) * 1000 for t in measured.timings[of] if t.error is None and getattr(t, what)]

    mine, base = values(name), values(direct)
    row = {"p50_ms": percentile(mine, 50), "p99_ms": percentile(mine, 99),
           "direct_p50_ms": percentile(base, 50), "direct_p99_ms": percentile(base, 99), "n": float(len(mine))}
    row["added_p50_ms"] = row["p50_ms"] - row["direct_p50_ms"]
    row["added_p99_ms"] = row["p99_ms"] - row["direct_p99_ms"]
    return {k: round(v, 3) for k, v in row.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--target", action="append", required=True, help="name=URL (the first one is the direct one)")
    parser.add_argument("--body", default='{"model": "fake-model", "input": "hello", "stream": true}')
    parser.add_argument("--direct-body", default='{"model": "fake-model", "stream": true, '
                                                 '"messages": [{"role": "user", "content": "hello"}]}')
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--time", type=float, default=120.0)
    args = parser.parse_args()
    targets = []
    for i, spec in enumerate(args.target):
        name, _, url = spec.partition("=")
        targets.append(Target(name, url, (args.direct_body if i == 0 else args.body).encode()))
    measured = asyncio.run(measure(targets, clients=args.clients, rounds=args.rounds, time_limit=args.time))
    for target in targets[1:]:
        for what in ("first_event", "last_byte"):
            print(target.name, what, json.dumps(added(measured, target.name, targets[0].name, what)))
        print(target.name, "errors", measured.errors(target.name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
