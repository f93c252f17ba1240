"""A bounded loopback load generator for SSE endpoints: N concurrent streaming POSTs over raw asyncio sockets.

Usage (from the repository root)::

    .venv/bin/python benchmarks/loadgen.py --url http://127.0.0.1:8080/v1/responses -c 100 -n 1000 --time 30

Why raw sockets: at 1,000 streams and ~10^5 events/s the generator must cost far less per event than the server it
loads, or it measures itself. One ``asyncio.Protocol`` per connection; per received segment the work is one
``bytes.count`` (frames), a tail carry for frames split across segments, and a status-line check on the first one.
Each request uses ``Connection: close``; a response ends at its chunked body's last chunk (``0\\r\\n\\r\\n``), or at
EOF, and is complete only when that last chunk arrived.

What counts as an event: an SSE frame carrying an ``id:`` line (keep-alive and ping comments are not events). The
gateway, the Starlette floor and sse-starlette all write ``id:`` first in every frame, and JSON never holds a raw
newline, so ``b"\\nid:"`` occurs once per frame (a chunk header's ``\\r\\n`` precedes the first one).

Errors (each counted by kind): refused or reset connections, a status other than 200, a body cut before the final
chunk, a per-request timeout, and (when ``expected_events`` is given) a stream with a different number of events.

Bounds: at most ``total`` requests, no new request after ``time_limit`` seconds, and every request has ``timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["LoadResult", "StreamOutcome", "build_request", "exchange", "percentile", "run_load", "stream_once"]

_FRAME = b"\nid:"
_LAST_CHUNK = b"0\r\n\r\n"
_CARRY = len(_FRAME) - 1


def build_request(host: str, port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """The raw HTTP/1.1 POST (``Connection: close``) sent by every stream."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        "Accept: text/event-stream",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass(slots=True)
class StreamOutcome:
    """One request: ``error`` is None when it succeeded."""

    status: int = 0
    events: int = 0
    ttfb: float | None = None  # seconds from the request written to the first response byte
    error: str | None = None
    first_event_at: float | None = None


class _StreamProtocol(asyncio.Protocol):
    def __init__(self, request: bytes, done: asyncio.Future[None], on_first: Callable[[], None] | None,
                 frame: bytes = _FRAME) -> None:
        self.request = request
        self.frame = frame
        self.done = done
        self.on_first = on_first
        self.out = StreamOutcome()
        self.sent_at = 0.0
        self.tail = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.sent_at = time.perf_counter()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        out = self.out
        if out.ttfb is None:
            out.ttfb = time.perf_counter() - self.sent_at
            head = data[:12]
            if head.startswith(b"HTTP/1.") and head[9:12].isdigit():
                out.status = int(head[9:12])
            if self.on_first is not None:
                self.on_first()
        joined = self.tail + data
        out.events += joined.count(self.frame)
        # keep enough bytes to see a frame marker or the last chunk split across segments
        self.tail = joined[-max(_CARRY, len(_LAST_CHUNK)) :]
        if self.tail.endswith(_LAST_CHUNK) and not self.done.done():
            # The body is complete at its last chunk: a server that keeps the connection open despite our
            # ``Connection: close`` (Portkey forwards the upstream's ``connection: keep-alive``) must not make the
            # stream last until its keep-alive timeout.
            self.done.set_result(None)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            if exc is not None:
                self.out.error = f"reset:{type(exc).__name__}"
            self.done.set_result(None)


async def exchange(host: str, port: int, protocol: asyncio.Protocol, done: asyncio.Future[None],
                   timeout: float) -> str | None:
    """Connect ``protocol`` to ``host:port`` and wait (``timeout`` s at most) until it sets ``done``; the connection
    is closed either way. Never raises: ``"timeout"``, ``"connect:<error>"`` or None."""
    transport: asyncio.BaseTransport | None = None
    try:
        async with asyncio.timeout(timeout):
            transport, _ = await asyncio.get_running_loop().create_connection(lambda: protocol, host, port)
            await done
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return f"connect:{type(exc).__name__}"
    finally:
        if transport is not None:
            transport.close()
    return None


async def stream_once(
    host: str,
    port: int,
    request: bytes,
    *,
    timeout: float,
    expected_events: int | None = None,
    on_first: Callable[[], None] | None = None,
    frame: bytes = _FRAME,
) -> StreamOutcome:
    """Send one request and read the whole streamed response. Never raises: failures are ``outcome.error``."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    proto = _StreamProtocol(request, done, on_first, frame)
    out = proto.out
    out.error = await exchange(host, port, proto, done, timeout) or out.error
    if out.error is None:
        if out.status != 200:
            out.error = f"status:{out.status}"
        elif not proto.tail.endswith(_LAST_CHUNK):
            out.error = "truncated"
        elif expected_events is not None and out.events != expected_events:
            out.error = f"events:{out.events}!={expected_events}"
    return out


def percentile(values: list[float], q: float, *, empty: float = 0.0) -> float:
    """The ``q``-th percentile (0..100) by nearest rank; ``empty`` for no values."""
    if not values:
        return empty
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class LoadResult:
    concurrency: int
    requests: int = 0
    ok: int = 0
    events: int = 0
    elapsed: float = 0.0
    ttfbs: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def events_per_s(self) -> float:
        return self.events / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def ttfb_p50_ms(self) -> float:
        return percentile(self.ttfbs, 50) * 1000

    @property
    def ttfb_p99_ms(self) -> float:
        return percentile(self.ttfbs, 99) * 1000

    def summary(self) -> dict[str, object]:
        return {
            "concurrency": self.concurrency, "requests": self.requests, "ok": self.ok, "events": self.events,
            "elapsed_s": round(self.elapsed, 3), "events_per_s": round(self.events_per_s),
            "ttfb_p50_ms": round(self.ttfb_p50_ms, 2), "ttfb_p99_ms": round(self.ttfb_p99_ms, 2),
            "errors": dict(self.errors),
        }


async def run_load(
    url: str,
    body: bytes,
    *,
    concurrency: int,
    total: int,
    time_limit: float,
    timeout: float = 60.0,
    expected_events: int | None = None,
    headers: dict[str, str] | None = None,
    on_all_open: Callable[[], None] | None = None,
    frame: bytes = _FRAME,
) -> LoadResult:
    """Keep ``concurrency`` streams in flight until ``total`` requests were made or ``time_limit`` passed.

    ``on_all_open`` is called once, when ``concurrency`` streams have received their first byte at the same time
    (used to sample the server's memory with every stream open). Raises ValueError for a URL that is not http.
    """
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"need an http:// URL, not {url!r}")
    host, port = parts.hostname, parts.port or 80
    request = build_request(host, port, parts.path or "/", body, headers)
    result = LoadResult(concurrency)
    started = time.perf_counter()
    stop_at = started + time_limit
    launched = 0
    open_now = 0
    fired = False

    def first_byte() -> None:
        nonlocal open_now, fired
        open_now += 1
        if not fired and open_now >= concurrency and on_all_open is not None:
            fired = True
            on_all_open()

    async def worker() -> None:
        nonlocal launched, open_now
        while launched < total and time.perf_counter() < stop_at:
            launched += 1
            out = await stream_once(host, port, request, timeout=timeout, expected_events=expected_events,
                                    on_first=first_byte, frame=frame)
            if out.ttfb is not None:
                open_now -= 1
                result.ttfbs.append(out.ttfb)
            result.requests += 1
            result.events += out.events
            if out.error is None:
                result.ok += 1
            else:
                result.errors[out.error.split(":")[0] if out.error.startswith("reset") else out.error] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.elapsed = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description="bounded loopback SSE load generator")
    parser.add_argument("--url", required=True, help="http://host:port/path (POSTed)")
    parser.add_argument("--body", default='{"input": "hello", "stream": true}', help="JSON request body")
    parser.add_argument("-c", "--concurrency", type=int, default=10)
    parser.add_argument("-n", "--total", type=int, default=100, help="max requests")
    parser.add_argument("--time", type=float, default=30.0, help="no new request after this many seconds")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout (s)")
    parser.add_argument("--expect-events", type=int, default=None)
    args = parser.parse_args()
    result = asyncio.run(run_load(args.url, args.body.encode(), concurrency=args.concurrency, total=args.total,
                                  time_limit=args.time, timeout=args.timeout, expected_events=args.expect_events))
    print(json.dumps(result.summary()))
    if result.ttfbs:
        print(f"# median ttfb {statistics.median(result.ttfbs) * 1000:.2f} ms", flush=True)
    return 1 if result.error_count else 0


if __name__ == "__main__":
    raise SystemExit(main())
