"""Start our gateway (the real app) on a loopback port with a SIMULATED scripted upstream, for interop tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from conformance.live_servers import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

__all__ = ["TEXT_UPSTREAM", "TOOL_UPSTREAM", "Gateway", "serve"]

TEXT_UPSTREAM = "scripted:12?delay_ms=2"
TOOL_UPSTREAM = "scripted:12?delay_ms=2&tool=get_weather"


@dataclass(frozen=True)
class Gateway:
    base_url: str  # http://127.0.0.1:PORT/v1
    dialect: str


def serve(dialect: str, upstream: str) -> Iterator[Gateway]:
    """Yields a running gateway; stops it afterwards."""
    with ServerThread(create_app(Config(dialect=dialect, upstreams=[upstream]))) as server:
        yield Gateway(server.base_url, dialect)
