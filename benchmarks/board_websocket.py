"""The board's WebSocket-vs-SSE measure: the server's CPU per event for the same responses streamed over a Responses
WebSocket session and over SSE, on the same running instance, in the same run.

Workload, the same on both sides: ``clients`` sessions at once, each asking ``turns`` responses one after another
with the board's request (benchmarks/board_measure.py ``request_body``: same model, input and defaults, so the same
responses, stored alike), each read to its terminal event:

- ``websocket``: one WebSocket a session (``GET /v1/responses`` upgraded, no compression offered), each response a
  ``response.create`` message;
- ``sse``: one keep-alive HTTP/1.1 connection a session, each response a ``POST /v1/responses`` (``stream: true``)
  read to its last chunk. Keep-alive on both sides, so the difference is the transport, not connection setup.

Measured: the server process tree's user + system CPU (benchmarks/procstat.py) around each side's load, over the
events received. The sides alternate ``pairs`` times (websocket first, then sse first, ...); each pair gives a ratio
websocket/sse, and the median of those ratios is the figure (same instance, adjacent in time, so the machine's load
hits both alike). Bounded: ``time_limit`` seconds a side at most, a ``read_timeout`` on every read.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from board_measure import request_body
from local_gateway import TERMINALS
from procstat import sample

__all__ = ["sse_session", "websocket_session", "ws_vs_sse"]

_ENDS = TERMINALS | {"error"}  # an error event ends the response too (counted as a failure below)


async def websocket_session(url: str, headers: dict[str, str], body: bytes, *, turns: int, deadline: float,
                            read_timeout: float) -> tuple[int, int, list[str]]:
    """``turns`` responses on one WebSocket: (responses ended, events received, failures)."""
    create = json.loads(body)
    create.pop("stream", None)  # a WebSocket response always streams; the message names no ``stream`` field
    message = json.dumps({"type": "response.create", **create})
    events, done, failures = 0, 0, []
    async with connect(url.replace("http://", "ws://", 1), additional_headers=headers, compression=None,
                       max_size=None, open_timeout=read_timeout) as ws:
        for _ in range(turns):
            if time.monotonic() > deadline:
                break
            await ws.send(message)
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), read_timeout))
                events += 1
                kind = event.get("type")
                if kind in _ENDS:
                    if kind != "response.completed":
                        failures.append(str(kind))
                    done += 1
                    break
    return done, events, failures


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """One chunked body, read to its last chunk (the connection stays open for the next request)."""
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append((await reader.readexactly(size + 2))[:-2])


async def sse_session(url: str, headers: dict[str, str], body: bytes, *, turns: int, deadline: float,
                      read_timeout: float) -> tuple[int, int, list[str]]:
    """``turns`` streaming responses on one keep-alive connection: (responses ended, events, failures)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    events, done, failures = 0, 0, []
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), read_timeout)
    try:
        for _ in range(turns):
            if time.monotonic() > deadline:
                break
            writer.write(request)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), read_timeout)
            if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
                failures.append(f"status:{head[9:12].decode(errors='replace')}")
                break  # no chunked stream to read past: this connection's framing is unknown from here
            text = await asyncio.wait_for(_read_chunked(reader), read_timeout)
            count = text.count(b"\ndata:") + text.startswith(b"data:")
            events += count
            done += 1
            if b"response.completed" not in text:
                failures.append("no response.completed")
    finally:
        writer.close()
    return done, events, failures


async def _side(side: str, pid: int, url: str, headers: dict[str, str], body: bytes, *, clients: int, turns: int,
                time_limit: float, read_timeout: float) -> dict[str, Any]:
    session = websocket_session if side == "websocket" else sse_session
    deadline = time.monotonic() + time_limit
    before = sample(pid)
    results = await asyncio.gather(*(session(url, headers, body, turns=turns, deadline=deadline,
                                             read_timeout=read_timeout) for _ in range(clients)),
                                   return_exceptions=True)
    used = sample(pid).since(before)
    responses = events = 0
    failures: dict[str, int] = {}
    for result in results:
        if isinstance(result, BaseException):
            kind = type(result).__name__
            failures[kind] = failures.get(kind, 0) + 1
            continue
        responses += result[0]
        events += result[1]
        for kind in result[2]:
            failures[kind] = failures.get(kind, 0) + 1
    return {"responses": responses, "events": events, "cpu_s": round(used.cpu_s, 3),
            "cpu_ms_per_1000_events": round(used.cpu_s / events * 1e6, 2) if events else None, "failures": failures}


async def ws_vs_sse(pid: int, url: str, headers: dict[str, str], api: str, *, clients: int, turns: int, pairs: int,
                    time_limit: float, read_timeout: float = 60.0) -> dict[str, Any]:
    """CPU per 1,000 events over WebSocket and over SSE on the running server ``pid`` at ``url``, and the median
    of the per-pair ratios websocket/sse (module docstring: the workload)."""
    body = request_body(api, stream=True, direct=False)
    for side in ("websocket", "sse"):  # warm-up: first-connection caches, pools, imports on both paths
        await _side(side, pid, url, headers, body, clients=min(clients, 2), turns=2, time_limit=time_limit,
                    read_timeout=read_timeout)
    runs: dict[str, list[dict[str, Any]]] = {"websocket": [], "sse": []}
    ratios = []
    for pair in range(pairs):
        order = ("websocket", "sse") if pair % 2 == 0 else ("sse", "websocket")
        for side in order:
            runs[side].append(await _side(side, pid, url, headers, body, clients=clients, turns=turns,
                                          time_limit=time_limit, read_timeout=read_timeout))
        ws, sse = runs["websocket"][-1]["cpu_ms_per_1000_events"], runs["sse"][-1]["cpu_ms_per_1000_events"]
        if ws is not None and sse:
            ratios.append(ws / sse)

    def median_of(side: str) -> float | None:
        values = [r["cpu_ms_per_1000_events"] for r in runs[side] if r["cpu_ms_per_1000_events"] is not None]
        return round(statistics.median(values), 2) if values else None

    failures: dict[str, dict[str, int]] = {side: {} for side in runs}
    for side, side_runs in runs.items():
        for run in side_runs:
            for kind, count in run["failures"].items():
                failures[side][kind] = failures[side].get(kind, 0) + count
    return {"clients": clients, "turns": turns, "pairs": pairs,
            "websocket_cpu_ms_per_1000_events": median_of("websocket"),
            "sse_cpu_ms_per_1000_events": median_of("sse"),
            "websocket_over_sse": round(statistics.median(ratios), 3) if ratios else None,
            "ratios": [round(r, 3) for r in ratios],
            "events": {side: [r["events"] for r in runs[side]] for side in runs},
            "events_per_response": {side: round(sum(r["events"] for r in runs[side])
                                                / max(1, sum(r["responses"] for r in runs[side])), 1)
                                    for side in runs},
            "failures": failures}
