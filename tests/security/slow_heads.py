"""The slowloris attackers of the connection-fairness tests (test_slowloris_fairness.py, one client holding every
connection; test_fair_share_connections.py, a thousand addresses holding one each) and the ``/healthz`` probe that
counts what the other clients got meanwhile. Half-sent request heads on real sockets to a REAL ``respstream
serve`` on loopback; Linux routes all of 127.0.0.0/8 to loopback, so an attacker binds to another address."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import httpx

__all__ = ["HEAD", "Probe", "SlowHeads", "pool_case", "probe_healthz"]

HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: "  # never finished


class SlowHeads:
    """A thread that keeps half-sent request heads (``HEAD``) open to ``port`` until the ``with`` block ends;
    ``opened`` counts the connections it made. A subclass's ``_run`` says from where and how many."""

    join_seconds = 10.0

    def __init__(self, port: int) -> None:
        self.port = port
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def _open(self, source: str) -> socket.socket | None:
        """A new connection from ``source`` with the head half sent; None when it could not connect."""
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=2, source_address=(source, 0))
            s.sendall(HEAD)
        except OSError:
            return None
        self.opened += 1
        return s

    @staticmethod
    def _closed_by_server(held: Iterable[socket.socket]) -> list[socket.socket]:
        """Of ``held``, the sockets the server closed (EOF or reset) within 50 ms, closed here too."""
        poller = select.poll()  # not select(): it cannot watch descriptors past 1024
        by_fd = {s.fileno(): s for s in held}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        gone: list[socket.socket] = []
        for fd, _ in poller.poll(50):
            s = by_fd[fd]
            try:
                closed = s.recv(1024) == b""
            except OSError:
                closed = True
            if closed:
                s.close()
                gone.append(s)
        return gone

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.join_seconds)


@dataclass
class Probe:
    answered: int
    failed: int
    slowest: float  # seconds, the slowest attempt (answered or not)


def probe_healthz(url: str, seconds: float, *, every: float, timeout: float) -> Probe:
    """``/healthz`` on a new connection (as a balancer's would be) every ``every`` s for ``seconds``: how many
    answered 200, how many failed (another status, a timeout after ``timeout`` s, a refused connection)."""
    answered = failed = 0
    slowest = 0.0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            with httpx.Client(timeout=timeout) as client:
                ok = client.get(f"{url}/healthz").status_code == 200
            answered += ok
            failed += not ok
        except httpx.HTTPError:
            failed += 1
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(every)
    return Probe(answered, failed, slowest)


def pool_case(case: str, tmp: Path) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The gateway's CLI arguments and settings for a fairness case: ``pure`` (h11) or ``auto`` (httptools), 100
    connections; ``workers``: ``--workers 2`` on ``auto``, each worker with its own pool and its own fairness (and
    the shared store that several workers need)."""
    settings: dict[str, Any] = {"max_connections": 100, "http_stack": "auto" if case == "workers" else case}
    if case != "workers":
        return (), settings
    settings.update(store=f"sqlite:///{tmp}/responses.db", data_dir=str(tmp / "data"))
    return ("--workers", "2"), settings
