"""The board's memory per ACTIVE connection: the server tree's RSS with ``count`` streams in flight at once, events
still flowing on each, minus its RSS before (after a warm-up), per connection.

The system runs in front of the SIMULATED upstream's ``/drip/`` answers (benchmarks/fake_upstreams.py: the 200-delta
stream, one frame every ``DRIP_SECONDS``, so a stream lasts minutes and ``count`` of them cost ``count /
DRIP_SECONDS`` events/s, little CPU). Every client connection reads all it is sent until released; the figure
counts how many connections were still receiving bytes across the moment RSS was read (``active``), so a system
that stalled or ended its streams does not pass for one that holds them cheaply.

- SSE: ``count`` ``POST /v1/responses`` (``stream: true``), the board's request;
- WebSocket (systems with a Responses WebSocket mode): ``count`` WebSockets, each sending one ``response.create``
  with the same request.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from board_measure import request_body, tree_rss_kib
from loadgen import build_request

__all__ = ["active_memory", "ws_text_frame"]


def ws_text_frame(payload: bytes) -> bytes:
    """A client's masked text frame (RFC 6455 5.2). The mask key is zero: a server unmasks it all the same, and the
    board's client needs no randomness."""
    size = len(payload)
    if size < 126:
        length = bytes([0x80 | size])
    elif size < 65536:
        length = bytes([0x80 | 126]) + size.to_bytes(2, "big")
    else:
        length = bytes([0x80 | 127]) + size.to_bytes(8, "big")
    return b"\x81" + length + b"\0\0\0\0" + payload


class _Holder:
    """One connection: opened (its first bytes came, or it failed), then read to the end until released."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.received = 0
        self.failure: str | None = None

    async def run(self, host: str, port: int, first: bytes, then: bytes, release: asyncio.Event) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 30)
        except (OSError, TimeoutError) as exc:
            self.failure = f"connect:{type(exc).__name__}"
            self.opened.set()
            return
        draining = asyncio.ensure_future(self._drain(reader, writer, first, then))
        try:
            await asyncio.wait({draining, asyncio.ensure_future(release.wait())},
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            draining.cancel()
            writer.close()
            self.opened.set()

    async def _drain(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes,
                     then: bytes) -> None:
        try:
            writer.write(first)
            if then:  # a WebSocket: its upgrade answered before the request goes out
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
                if not head.startswith(b"HTTP/1.1 101"):
                    self.failure = f"status:{head[9:12].decode(errors='replace')}"
                    return
                writer.write(then)
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    self.failure = self.failure or "closed"
                    return
                self.received += len(chunk)
                self.opened.set()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            self.failure = type(exc).__name__
        finally:
            self.opened.set()


async def active_memory(pid: int, url: str, headers: dict[str, str], api: str, *, count: int,
                        websocket: bool = False, settle: float = 2.0) -> dict[str, Any]:
    """RSS of the server tree per active connection (module docstring), ``count`` held at once."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    body = request_body(api, stream=True, direct=False)
    if websocket:
        create = json.loads(body)
        create.pop("stream", None)
        then = ws_text_frame(json.dumps({"type": "response.create", **create}).encode())
    else:
        then = b""

    def first() -> bytes:
        if not websocket:
            return build_request(host, port, parts.path, body, headers)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (f"GET {parts.path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n").encode()

    async def hold(n: int) -> dict[str, Any]:
        release = asyncio.Event()
        holders = [_Holder() for _ in range(n)]
        tasks = [asyncio.create_task(h.run(host, port, first(), then, release)) for h in holders]
        for at in range(0, n, 100):  # open them in waves: a listen backlog is not the thing measured
            await asyncio.wait([asyncio.ensure_future(h.opened.wait()) for h in holders[at : at + 100]], timeout=5)
        await asyncio.wait([asyncio.ensure_future(h.opened.wait()) for h in holders], timeout=20)
        await asyncio.sleep(settle)
        received = [h.received for h in holders]
        rss = tree_rss_kib(pid)
        await asyncio.sleep(settle)  # bytes still coming after the reading: the streams were active across it
        active = sum(h.received > seen and h.failure is None for h, seen in zip(holders, received, strict=True))
        release.set()
        await asyncio.gather(*tasks)
        failures = [h.failure for h in holders if h.failure is not None]
        return {"rss": rss, "active": active, "failures": failures, "no_byte": sum(not r for r in received)}

    await hold(min(count, 20))  # warm-up: first-connection caches, pools
    await asyncio.sleep(1.0)
    before = tree_rss_kib(pid)
    held = await hold(count)
    return {"connections": count, "websocket": websocket, "rss_before_kib": before, "rss_held_kib": held["rss"],
            "kib_per_connection": round((held["rss"] - before) / count, 1), "active": held["active"],
            "failures": len(held["failures"]), "failure_kinds": sorted(set(held["failures"]))[:5],
            "no_byte_yet": held["no_byte"]}
