"""The board's measurements of one running system: added latency, CPU per 1,000 events, memory per idle
connection, and `respstream check` on its captured streams. Each is bounded in requests and seconds.

Added latency pairs the system with the direct SIMULATED upstream in the same phase (benchmarks/added_latency.py:
every worker alternates the two, rotating the order), so the machine's load hits both alike. CPU is the server
process tree's user + system time from /proc (benchmarks/procstat.py) around a bounded load of ``clients`` streams
(benchmarks/loadgen.py, one ``data:`` line an event for every system). Memory: the tree's RSS with ``count``
connections held idle minus its RSS before, after a warm-up.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from added_latency import Target, added, fetch, measure
from loadgen import run_load
from procstat import process_tree, sample

__all__ = ["check_stream", "cpu_per_events", "idle_memory", "latency", "request_body", "resume_latency",
           "tree_rss_kib"]

MODEL = "fake-model"
VENV_BIN = Path(sys.executable).parent


def request_body(api: str, *, stream: bool, direct: bool) -> bytes:
    """The board's request: ``POST /v1/responses`` for a system; the same question in the upstream's own API for
    the direct baseline."""
    if direct and api == "chat":
        return json.dumps({"model": MODEL, "stream": stream,
                           "messages": [{"role": "user", "content": "hello"}]}).encode()
    return json.dumps({"model": MODEL, "input": "hello", "stream": stream}).encode()


async def latency(url: str, headers: dict[str, str], api: str, direct_v1: str, *, clients: int, rounds: int,
                  time_limit: float, stream: bool) -> dict[str, Any]:
    """Added latency of one system against the direct upstream: first event (streaming) and last byte, p50/p99."""
    direct_url = f"{direct_v1}/chat/completions" if api == "chat" else f"{direct_v1}/responses"
    targets = [Target("direct", direct_url, request_body(api, stream=stream, direct=True)),
               Target("system", url, request_body(api, stream=stream, direct=False), tuple(headers.items()))]
    measured = await measure(targets, clients=clients, rounds=rounds, time_limit=time_limit)
    out: dict[str, Any] = {"clients": clients, "stream": stream, "errors": measured.errors("system"),
                           "direct_errors": measured.errors("direct")}
    for what in ("first_event", "last_byte") if stream else ("last_byte",):
        out[what] = added(measured, "system", "direct", what)
    return out


def tree_rss_kib(pid: int) -> int:
    total = 0
    for member in process_tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


async def cpu_per_events(pid: int, url: str, headers: dict[str, str], api: str, *, clients: int, total: int,
                         time_limit: float) -> dict[str, Any]:
    """Server CPU per 1,000 events and events/s with ``clients`` streams in flight (bounded: ``total`` requests)."""
    body = request_body(api, stream=True, direct=False)
    await run_load(url, body, concurrency=min(clients, 8), total=min(total, 40), time_limit=time_limit,
                   headers=headers, frame=b"\ndata:")  # warm-up
    before = sample(pid)
    result = await run_load(url, body, concurrency=clients, total=total, time_limit=time_limit, timeout=120,
                            headers=headers, frame=b"\ndata:")
    used = sample(pid).since(before)
    events = result.events
    return {"clients": clients, "requests": result.requests, "ok": result.ok, "events": events,
            "events_per_request": round(events / result.requests, 1) if result.requests else None,
            "events_per_s": round(result.events_per_s), "cpu_s": round(used.cpu_s, 3),
            "cpu_ms_per_1000_events": round(used.cpu_s / events * 1e6, 2) if events else None,
            "errors": dict(result.errors)}


async def _connect(host: str, port: int, opened: asyncio.Event, failures: list[str]
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A held connection's TCP connect; None (the failure noted and ``opened`` set) when it could not be made."""
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), 30)
    except (OSError, TimeoutError) as exc:
        failures.append(f"connect:{type(exc).__name__}")
        opened.set()
        return None


async def _hold_sse(host: str, port: int, request: bytes, opened: asyncio.Event, release: asyncio.Event,
                    failures: list[str]) -> None:
    """One streaming request held open: ``opened`` is set at its first response byte (a system that sends nothing
    before its upstream's first token still holds the connection, so the caller stops waiting after a while)."""
    connection = await _connect(host, port, opened, failures)
    if connection is None:
        return
    reader, writer = connection
    try:
        writer.write(request)
        reading = asyncio.ensure_future(reader.read(65536))
        done, _ = await asyncio.wait({reading, asyncio.ensure_future(release.wait())},
                                     return_when=asyncio.FIRST_COMPLETED)
        if reading in done and not reading.result():
            failures.append("closed")
        opened.set()
        await release.wait()
        reading.cancel()
    except OSError as exc:
        failures.append(type(exc).__name__)
        opened.set()
    finally:
        writer.close()


async def _hold_websocket(host: str, port: int, path: str, opened: asyncio.Event, release: asyncio.Event,
                          failures: list[str]) -> None:
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    connection = await _connect(host, port, opened, failures)
    if connection is None:
        return
    reader, writer = connection
    try:
        writer.write(request)
        async with asyncio.timeout(60):
            head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            failures.append(f"status:{head[9:12].decode(errors='replace')}")
        opened.set()
        await release.wait()
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        failures.append(type(exc).__name__)
        opened.set()
    finally:
        writer.close()


async def idle_memory(pid: int, url: str, headers: dict[str, str], api: str, *, count: int,
                      websocket: bool = False) -> dict[str, Any]:
    """RSS of the server tree per idle connection: ``count`` SSE streams whose upstream went quiet after its first
    frame (or ``count`` WebSocket connections with no request), held at once."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    body = request_body(api, stream=True, direct=False)
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def hold(n: int) -> tuple[list[str], int, int]:
        release = asyncio.Event()
        failures: list[str] = []
        events = [asyncio.Event() for _ in range(n)]
        tasks = [asyncio.create_task(_hold_websocket(host, port, parts.path, e, release, failures) if websocket
                                     else _hold_sse(host, port, request, e, release, failures)) for e in events]
        for at in range(0, n, 100):  # open them in waves: a listen backlog is not the thing measured
            await asyncio.wait([asyncio.ensure_future(e.wait()) for e in events[at : at + 100]], timeout=5)
        await asyncio.wait([asyncio.ensure_future(e.wait()) for e in events], timeout=15)
        silent = sum(not e.is_set() for e in events)  # open, but nothing came back yet (still held)
        await asyncio.sleep(1.0)
        rss = tree_rss_kib(pid)
        release.set()
        await asyncio.gather(*tasks)
        return failures, rss, silent

    await hold(min(count, 20))  # warm-up: first-connection caches, pools
    await asyncio.sleep(1.0)
    before = tree_rss_kib(pid)
    failures, held, silent = await hold(count)
    return {"connections": count, "websocket": websocket, "rss_before_kib": before, "rss_held_kib": held,
            "kib_per_connection": round((held - before) / count, 1), "failures": len(failures),
            "failure_kinds": sorted(set(failures))[:5], "no_byte_yet": silent}


def _dechunk(body: bytes) -> bytes:
    """A chunked body's data (what arrived of it, when it was cut)."""
    out, at = [], 0
    while at < len(body):
        end = body.find(b"\r\n", at)
        if end < 0:
            break
        try:
            size = int(body[at:end].split(b";")[0], 16)
        except ValueError:
            return body  # not chunked after all
        if size == 0:
            break
        out.append(body[end + 2 : end + 2 + size])
        at = end + 2 + size + 2
    return b"".join(out)


async def check_stream(url: str, headers: dict[str, str], api: str) -> dict[str, Any]:
    """One streaming response, captured and run through ``respstream check --json``: its violation codes."""
    target = Target("system", url, request_body(api, stream=True, direct=False), tuple(headers.items()))
    timing = await fetch(target, timeout=60, keep_body=True)
    transcript = _dechunk(timing.body)
    with tempfile.NamedTemporaryFile(suffix=".sse", delete=False) as handle:
        handle.write(transcript)
    try:
        done = subprocess.run([str(VENV_BIN / "respstream"), "check", handle.name, "--json"], capture_output=True,
                              timeout=120, check=False)
    finally:
        os.unlink(handle.name)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return {"status": timing.status, "error": timing.error, "check": "unreadable",
                "stderr": done.stderr.decode(errors="replace")[-300:], "violations": None}
    codes = [v.get("code") for v in report.get("violations", [])]
    return {"status": timing.status, "transport_error": timing.error, "bytes": len(transcript),
            "final_status": report.get("status"), "violations": len(codes), "codes": sorted(set(codes))}


async def resume_latency(create_url: str, resume_base: str, *, rounds: int, after: int = 5) -> dict[str, Any]:
    """Resume on another instance: each round creates a streaming response on one gateway (read to its end), then
    ``GET {resume_base}/{id}?stream=true&starting_after={after}`` on a second gateway sharing its store; the time to
    that stream's first event, p50/p99 (ms)."""
    import re

    from added_latency import percentile

    firsts: list[float] = []
    errors: dict[str, int] = {}
    body = request_body("chat", stream=True, direct=False)
    for _ in range(rounds):
        made = await fetch(Target("create", create_url, body), timeout=60, keep_body=True)
        found = re.search(rb'"response":\{"id":"([^"]+)"', made.body)
        if made.error or found is None:
            errors[made.error or "no id"] = errors.get(made.error or "no id", 0) + 1
            continue
        rid = found.group(1).decode()
        url = f"{resume_base}/{rid}?stream=true&starting_after={after}"
        timing = await fetch(Target("resume", url, b"", method="GET"), timeout=60)
        if timing.error or not timing.first_event:
            errors[timing.error or "no event"] = errors.get(timing.error or "no event", 0) + 1
            continue
        firsts.append(timing.first_event * 1000)
    return {"rounds": rounds, "resumed": len(firsts), "errors": errors, "after": after,
            "first_event_p50_ms": round(percentile(firsts, 50), 3),
            "first_event_p99_ms": round(percentile(firsts, 99), 3)}
