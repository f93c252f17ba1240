"""Where the wall time of one streaming request goes: a timeline of ~1,000 sequential requests through the gateway.

Usage (from the repository root)::

    .venv/bin/python benchmarks/request_timeline.py [--requests 1000] [--warmup 50] [--tree SRC]

The SIMULATED upstream (benchmarks/fake_upstreams.py, 10 deltas) and the client run in this process on core 1; the
gateway (``respstream serve --upstream chat+...``) runs on core 0 in a child process started through this file's
``--serve`` mode, which wraps a few functions of uvicorn and of the gateway with a timestamp (``time.monotonic_ns``,
one clock for both processes) before it runs the ordinary CLI. The hooks live only here: the production path has no
timing code and no switch for it. One client sends one request at a time, a new connection each (``Connection:
close``, as benchmarks/added_latency.py does).

The points, per request (the client's own in brackets):

- [client connects], accepted (the protocol's ``connection_made``), head parsed, body read (httptools callbacks);
- route entered (``response_routes.create``), validated (``parse_request`` returned), record created (the store's
  ``create`` returned);
- app entered (``GatewayApp``), authenticated, body decoded (``AppGateway``);
- upstream request written, upstream first bytes, upstream body end (the upstream connection);
- response head written, first event written, terminal written, last byte written (the gateway's socket writes:
  the first, the first carrying ``data:``, the one carrying the terminal event, the one ending the chunked body),
  [client first event], [client last byte];
- after the last byte: the last store write (``update`` / ``append_nowait``), metrics, access log, connection closed.

Printed: for each point, its p50 and p99 offset from the connection accepted, in the order of the p50s, with the gap
to the point before (p50 of the per-request gaps), the socket writes a request makes, and how long each write call
took in the gateway (on loopback the sender's ``write`` runs the receiver's TCP path and wakes the reader, so a write
to a peer that sleeps costs more than one to a peer already awake). A point a request did not
reach (say, no store write after the last byte) is left out of that request's gaps. The hooks cost a few
microseconds each: read the gaps, not the total, against benchmarks/request_latency_trees.py.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextvars
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BODY = b'{"model": "fake-model", "input": "hello", "stream": true}'
TERMINALS = (b"response.completed", b"response.failed", b"response.incomplete", b'"type":"error"')

# -- the gateway side (--serve): hooks that stamp each point --------------------------------------------------------

_marks: list[tuple[int, str, int]] = []  # (connection number, point, monotonic ns)
_took: list[tuple[int, str, int]] = []  # (connection number, which socket write, ns it took)
_latest = [0]  # the newest accepted connection: points outside any request task (upstream callbacks) go to it
_conn: contextvars.ContextVar[int] = contextvars.ContextVar("timeline_conn", default=0)


def _mark(point: str, conn: int = 0) -> None:
    _marks.append((conn or _conn.get() or _latest[0], point, time.monotonic_ns()))


def _after(owner: Any, name: str, point: str | Callable[..., str | None]) -> None:
    """Wrap ``owner.name`` (sync or async) to stamp ``point`` when it returns (a callable picks it from the args)."""
    original = getattr(owner, name)

    def pick(args: tuple[Any, ...]) -> str | None:
        return point(*args) if callable(point) else point

    if asyncio.iscoroutinefunction(original):
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            result = await original(*args, **kwargs)
            if (chosen := pick(args)) is not None:
                _mark(chosen)
            return result
        setattr(owner, name, async_wrapper)
    else:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if (chosen := pick(args)) is not None:
                _mark(chosen)
            return result
        setattr(owner, name, wrapper)


class _TimedTransport:
    """The accepted connection's transport, stamping the writes that are timeline points."""

    def __init__(self, transport: Any, conn: int) -> None:
        self._transport = transport
        self._conn = conn
        self._writes = 0

    def write(self, data: bytes) -> None:
        began = time.monotonic_ns()
        self._transport.write(data)
        now = time.monotonic_ns()
        self._writes += 1
        _took.append((self._conn, f"write {self._writes} to the client", now - began))
        points = ["write"]
        if self._writes == 1:
            points.append("response head written")
        if b"data:" in data:
            points.append("event written")
        if any(name in data for name in TERMINALS):
            points.append("terminal written")
        if data.endswith(b"0\r\n\r\n"):
            points.append("last byte written")
        _marks.extend((self._conn, point, now) for point in points)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def install_hooks() -> None:
    from uvicorn.protocols.http import httptools_impl

    from respstream.server.http import request_scope, response_routes
    from respstream.server.http.app_gateway import AppGateway
    from respstream.server.store.memory import MemoryStore
    from respstream.server.telemetry.metrics import Metrics
    from respstream.server.upstream.http import connection

    protocol = httptools_impl.HttpToolsProtocol
    made, lost, head = protocol.connection_made, protocol.connection_lost, protocol.on_headers_complete
    body_end, run_asgi = protocol.on_message_complete, httptools_impl.RequestResponseCycle.run_asgi

    def connection_made(self: Any, transport: Any) -> None:
        _latest[0] += 1
        self._timeline_conn = _latest[0]
        _mark("accepted", self._timeline_conn)
        made(self, _TimedTransport(transport, self._timeline_conn))

    def connection_lost(self: Any, exc: Exception | None) -> None:
        lost(self, exc)
        _mark("connection closed", getattr(self, "_timeline_conn", 0))

    def on_headers_complete(self: Any) -> None:
        _mark("head parsed", self._timeline_conn)
        head(self)
        if self.cycle is not None:
            self.cycle._timeline_conn = self._timeline_conn

    def on_message_complete(self: Any) -> None:
        _mark("body read", self._timeline_conn)
        body_end(self)

    async def timed_run_asgi(self: Any, app: Any) -> None:
        _conn.set(getattr(self, "_timeline_conn", 0))  # this request's task (and the tasks it starts) only
        await run_asgi(self, app)

    protocol.connection_made = connection_made  # type: ignore[method-assign]
    protocol.connection_lost = connection_lost  # type: ignore[method-assign]
    protocol.on_headers_complete = on_headers_complete  # type: ignore[method-assign]
    protocol.on_message_complete = on_message_complete  # type: ignore[method-assign]
    httptools_impl.RequestResponseCycle.run_asgi = timed_run_asgi  # type: ignore[method-assign]

    route = response_routes.create

    async def create(gw: Any, request: Any) -> Any:
        _mark("route entered")
        return await route(gw, request)

    response_routes.create = create  # (app.py reads it when it builds the route table)
    app_call = request_scope.GatewayApp.__call__

    async def gateway_app(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            _mark("app entered")
        await app_call(self, scope, receive, send)

    request_scope.GatewayApp.__call__ = gateway_app  # type: ignore[method-assign]
    _after(AppGateway, "authenticate", "authenticated")
    _after(AppGateway, "read_json", "body decoded")
    _after(response_routes, "parse_request", "validated")
    _after(MemoryStore, "create", "record created")
    _after(MemoryStore, "update", "store write")
    _after(MemoryStore, "append_nowait", "store write")
    _after(Metrics, "request", "metrics")
    _after(request_scope, "log_access", "access log")
    upstream_send = connection.UpstreamConnection.send

    def send(self: Any, request: bytes) -> None:
        began = time.monotonic_ns()
        upstream_send(self, request)
        now = time.monotonic_ns()
        _marks.append((_conn.get() or _latest[0], "upstream request written", now))
        _took.append((_conn.get() or _latest[0], "the write to the upstream", now - began))

    connection.UpstreamConnection.send = send  # type: ignore[method-assign]
    upstream_data = connection.UpstreamConnection.data_received

    def data_received(self: Any, data: bytes) -> None:
        _mark("upstream first bytes")  # (the fake upstream's whole answer is usually one read)
        upstream_data(self, data)

    connection.UpstreamConnection.data_received = data_received  # type: ignore[method-assign]
    _after(connection.Dechunker, "on_message_complete", "upstream body end")


def serve(out: str, argv: list[str]) -> None:
    install_hooks()

    def dump() -> None:
        Path(out).write_text(json.dumps({"marks": _marks, "took": _took}))

    atexit.register(dump)
    sys.argv = ["respstream", *argv]
    runpy.run_module("respstream", run_name="__main__")


# -- the client side ----------------------------------------------------------------------------------------------

class _Client(asyncio.Protocol):
    def __init__(self, request: bytes, done: asyncio.Future[None], marks: dict[str, int]) -> None:
        self.request, self.done, self.marks = request, done, marks
        self.data = bytearray()

    def connection_made(self, transport: Any) -> None:
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        self.data += data
        if "client first event" not in self.marks and b"data:" in self.data:
            self.marks["client first event"] = now
        if self.data.endswith(b"0\r\n\r\n"):
            self.marks["client last byte"] = now
            if not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(RuntimeError(f"cut before the end: {bytes(self.data[-200:])!r}"))


async def _one(port: int) -> dict[str, int]:
    request = (f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n").encode() + BODY
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    marks = {"client connects": time.monotonic_ns()}
    client = _Client(request, done, marks)
    transport, _ = await loop.create_connection(lambda: client, "127.0.0.1", port)
    try:
        await asyncio.wait_for(done, 30)
    except TimeoutError:
        raise RuntimeError(f"no end in 30 s after {bytes(client.data[-300:])!r}") from None
    finally:
        transport.close()
    return marks


def _not_access(said: str) -> str:
    return "\n".join(line for line in said.splitlines() if '"respstream.access"' not in line)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e3 if ordered else float("nan")


def table(requests: list[dict[str, int]], writes: list[int]) -> str:
    """The timeline as a Markdown table: offsets from ``accepted`` (µs), in p50 order, and the gap to the point
    before (the p50 of the per-request differences, over the requests that reached both)."""
    names = {name for marks in requests for name in marks}
    offsets = {name: [m[name] - m["accepted"] for m in requests if name in m and "accepted" in m] for name in names}
    order = sorted(names, key=lambda name: _pct(offsets[name], 0.5))
    lines = ["| point | at p50 (µs) | at p99 (µs) | gap from the point before, p50 (µs) |",
             "|---|---:|---:|---:|"]
    before: str | None = None
    for name in order:
        gaps = [m[name] - m[before] for m in requests if before is not None and name in m and before in m]
        gap = f"{_pct(gaps, 0.5):.0f}" if gaps else ""
        lines.append(f"| {name} | {_pct(offsets[name], 0.5):.0f} | {_pct(offsets[name], 0.99):.0f} | {gap} |")
        before = name
    lines.append(f"\nsocket writes a request: {min(writes)}-{max(writes)} (median {sorted(writes)[len(writes) // 2]})"
                 f"; {len(requests)} requests")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE))
    from fake_upstreams import start_upstream

    os.sched_setaffinity(0, {1})
    upstream = await start_upstream(args.deltas)
    base = f"http://127.0.0.1:{upstream.sockets[0].getsockname()[1]}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        config, out, log = Path(tmp) / "gateway.toml", Path(tmp) / "marks.json", Path(tmp) / "gateway.log"
        config.write_text("upstream_probe_seconds = 0\n")
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(Path(args.tree).resolve()) if args.tree else str(ROOT / "src")}
        proc = subprocess.Popen(
            ["taskset", "-c", "0", sys.executable, str(Path(__file__).resolve()), "--serve", str(out), "--",
             "serve", "--port", str(port), "--upstream", "chat+" + base, "--config", str(config)],
            env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=log.open("wb"))  # (a pipe nobody reads fills)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        said = log.read_text(errors="replace")[-1500:]
                        raise RuntimeError(f"the gateway did not start: {said}") from None
                    await asyncio.sleep(0.2)
            try:
                for _ in range(args.warmup):
                    await _one(port)
                client = [await _one(port) for _ in range(args.requests)]
                await asyncio.sleep(0.5)  # the last request's work after its last byte
            except (OSError, RuntimeError, TimeoutError) as exc:
                proc.send_signal(signal.SIGTERM)
                await asyncio.to_thread(proc.wait, 60)
                last = json.loads(out.read_text())["marks"][-12:] if out.exists() else []
                said = _not_access(log.read_text(errors="replace"))[-3000:]
                raise RuntimeError(f"a request failed ({exc!r}); the gateway said: {said}; its last points: "
                                   f"{last}") from None
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 60)
        if not out.exists():
            raise RuntimeError(f"the gateway left no timeline: {_not_access(log.read_text(errors='replace'))[-1500:]}")
        stamped = json.loads(out.read_text())
        marks: list[tuple[int, str, int]] = stamped["marks"]
        took: list[tuple[int, str, int]] = stamped["took"]
    upstream.close()
    per_conn: dict[int, dict[str, int]] = {}
    writes: dict[int, int] = {}
    for conn, point, ns in marks:
        seen = per_conn.setdefault(conn, {})
        if point == "write":
            writes[conn] = writes.get(conn, 0) + 1
        elif point in ("store write", "event written"):  # the last store write; the first event
            key = "first event written" if point == "event written" else point
            if point == "event written" and key in seen:
                continue
            seen[key] = ns
        else:
            seen.setdefault(point, ns)
    # Readiness probes send no request; then the warm-up; the measured ones, last, pair with the client's marks.
    conns = [conn for conn in sorted(per_conn) if "head parsed" in per_conn[conn]][args.warmup:]
    if len(conns) != len(client):
        raise RuntimeError(f"{len(conns)} connections seen by the gateway, {len(client)} requests made")
    requests = []
    for conn, mine in zip(conns, client, strict=True):
        joined = {**per_conn[conn], **mine}
        # (a store write before the last byte is part of the stream, not the work after it)
        if "store write" in joined and joined["store write"] < joined.get("last byte written", 0):
            joined.pop("store write")
        requests.append(joined)
    print(f"timeline of a streaming request ({args.requests} sequential after {args.warmup}, {args.deltas} deltas, "
          f"chat upstream; load average {os.getloadavg()[0]:.2f}):\n")
    print(table(requests, [writes.get(conn, 0) for conn in conns]))
    measured = set(conns)
    durations: dict[str, list[int]] = {}
    for conn, what, ns in took:
        if conn in measured:
            durations.setdefault(what, []).append(ns)
    print("\nhow long each socket write took inside the gateway (the call, not the delivery):")
    for what in sorted(durations):
        print(f"  {what}: p50 {_pct(durations[what], 0.5):.1f} µs, p99 {_pct(durations[what], 0.99):.1f} µs "
              f"({len(durations[what])} writes)")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        sep = sys.argv.index("--")
        serve(sys.argv[2], sys.argv[sep + 1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--deltas", type=int, default=10)
    parser.add_argument("--tree", help="the source tree (its src directory) to run; default this checkout's")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
