"""``respstream serve --workers N``: N gateway processes on one port, each with its own event loop.

How this works:
- The supervisor (the process the user started) checks that the store is shared (SQLite or Redis: any worker must
  serve a read, resume, cancel or delete of a response another worker made; the memory store lives in one process,
  so ``workers > 1`` with it is refused), reserves the port, then starts N worker processes (``spawn``: no state
  inherited from the supervisor).
- Each worker binds its own listening socket with ``SO_REUSEPORT``, so the kernel spreads new connections across
  the workers (no shared accept queue, no thundering herd), and runs the ordinary single-process gateway on it
  (``run_gateway.serve_config``). Worker ``i`` gets the instance id ``<instance id>-w<i>``: its leases and unfinished
  logs are its own, and a restarted worker ``i`` recovers (ends with ``worker_lost``) what its previous run left.
- SIGTERM/SIGINT to the supervisor: it sends SIGTERM to every worker (each drains like a single gateway: stop
  accepting, end foreground streams with ``server_shutdown``, give background work ``shutdown_grace_seconds``), waits
  for all of them, and exits 0 when they all did. A worker that dies on its own is restarted (same index, so it
  recovers its logs): at once for its first ``MAX_RESTARTS`` deaths within a minute, then after a backoff that
  doubles from ``BACKOFF_FIRST`` up to ``BACKOFF_MAX`` seconds while it keeps dying (and is forgotten after a
  minute without a death). The other workers keep serving meanwhile: one worker that crashes in a loop (a bad
  request that kills it, a full disk) must not take the whole gateway down with it.
- Instance lock (``instance_lock.py``): ``serve`` takes the lock of ``<instance id>`` in the supervisor before any
  worker starts, and each worker takes the lock of its own ``<instance id>-w<i>`` before its startup recovery, so
  the same command started twice exits 2 with one line and touches nothing of the running group.
- Connection guard (``http_guard.py``): each worker runs ``serve_config``, so it gets the same request read deadline,
  connection cap and uvicorn limits (``limit_concurrency``, keep-alive, header size, ``proxy_headers``) as a single
  gateway; ``max_connections`` is per worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.process
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

from prometheus_client import multiprocess as prometheus_multiprocess

from respstream.server.config import Config
from respstream.server.http.instance_lock import InstanceLocked, lock_instance
from respstream.server.store.factory import is_memory_url

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "MAX_RESTARTS", "WorkerError", "check_workers", "restart_delay",
           "reuseport_socket", "run_workers"]

MAX_RESTARTS = 5  # immediate restarts per worker per minute; past it each restart waits a backoff
BACKOFF_FIRST = 1.0  # seconds before the first delayed restart, doubled for each further death
BACKOFF_MAX = 60.0
_POLL = 0.2


class WorkerError(ValueError):
    """``workers`` cannot be used with this configuration; the message says why and what to do."""


def check_workers(config: Config, workers: int) -> None:
    """Raises :class:`WorkerError` when ``workers`` processes cannot share this configuration."""
    if workers < 1:
        raise WorkerError(f"--workers must be at least 1, not {workers}")
    if workers > 1 and is_memory_url(config.store):
        raise WorkerError(
            f"--workers {workers} needs a store every worker shares: the memory store lives inside one process, so "
            "a response made by one worker could not be read, resumed, cancelled or deleted through another. Use "
            "--store sqlite:///path/to/file.db or --store redis://host:port/0 (or --workers 1)."
        )
    if workers > 1 and not hasattr(socket, "SO_REUSEPORT"):
        raise WorkerError("--workers > 1 needs SO_REUSEPORT, which this platform does not have")


def restart_delay(deaths: int) -> float:
    """Seconds before restarting a worker that died ``deaths`` times in the last minute (this death included)."""
    if deaths <= MAX_RESTARTS:
        return 0.0
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** (deaths - MAX_RESTARTS - 1))


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def reuseport_socket(host: str, port: int, *, listen: bool = True) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (listening unless ``listen`` is false).
    Raises ``OSError`` when the port is taken by a process outside the group."""
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when its parent exits (a supervisor killed with -9 leaves no orphan workers)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _worker_main(config: Config, index: int, log_level: str) -> None:
    """One worker: its own socket in the port's SO_REUSEPORT group, the single-process gateway on it."""
    from respstream.server.http.run_gateway import serve_config

    # Out of the terminal's process group: a Ctrl-C reaches only the supervisor, which turns it into one SIGTERM per
    # worker (a SIGINT after a SIGTERM would make uvicorn skip the drain). If the supervisor dies, so do we.
    os.setpgrp()
    _die_with_parent()
    worker = replace(config, instance_id=f"{config.instance_id}-w{index}")
    # Its own id locked before its startup recovery can run (a single `serve --instance-id X-w0`, or a worker of a
    # second supervisor that somehow got past the group lock, must not end this worker's responses). A restarted
    # worker takes it again: the kernel dropped its predecessor's lock when that process died.
    try:
        lock = lock_instance(config.resolved_data_dir(), worker.instance_id)
    except InstanceLocked as exc:
        print(f"respstream serve: worker {index}: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    sock = reuseport_socket(config.host, config.port)
    try:
        status = serve_config(worker, log_level, sockets=[sock])
    finally:
        lock.release()
    sys.exit(status)


class _Supervisor:
    def __init__(self, config: Config, workers: int, log_level: str) -> None:
        self.config = config
        self.count = workers
        self.log_level = log_level
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: dict[int, multiprocessing.process.BaseProcess] = {}
        self.restarts: dict[int, list[float]] = {}  # index -> when it died, within the last minute
        self.waiting: dict[int, float] = {}  # index -> when its restart is due (a dead worker in backoff)
        self.stopping = False

    def start(self, index: int) -> None:
        proc = self.ctx.Process(target=_worker_main, args=(self.config, index, self.log_level),
                                name=f"respstream-worker-{index}", daemon=False)
        proc.start()
        self.procs[index] = proc

    def on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def supervise(self) -> None:
        while not self.stopping:
            time.sleep(_POLL)
            now = time.monotonic()
            for index, proc in list(self.procs.items()):
                if proc.is_alive() or self.stopping or index in self.waiting:
                    continue
                recent = [t for t in self.restarts.get(index, []) if now - t < 60] + [now]
                self.restarts[index] = recent
                if proc.pid is not None:  # its live gauges no longer count in /metrics
                    with contextlib.suppress(Exception):
                        prometheus_multiprocess.mark_process_dead(proc.pid)  # type: ignore[no-untyped-call]
                delay = restart_delay(len(recent))
                self.waiting[index] = now + delay
                print(f"respstream serve: worker {index} exited with status {proc.exitcode}; restarting it"
                      + (f" in {delay:g} s ({len(recent)} exits in the last minute; the other workers keep serving)"
                         if delay else ""), file=sys.stderr, flush=True)
            for index, when in list(self.waiting.items()):
                if when <= now and not self.stopping:
                    del self.waiting[index]
                    self.start(index)

    def stop_all(self) -> bool:
        """SIGTERM every worker, wait for each to drain; True when every one exited 0."""
        for proc in self.procs.values():
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()  # SIGTERM: a graceful drain, never uvicorn's forced exit (a second SIGINT)
        deadline = time.monotonic() + self.config.shutdown_grace_seconds + 15
        clean = True
        for proc in self.procs.values():
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
                clean = False
            elif proc.exitcode != 0:
                clean = False
        return clean


def run_workers(config: Config, workers: int, log_level: str, banner: str) -> int:
    """Supervise ``workers`` gateway processes until SIGTERM/SIGINT. Returns the exit status."""
    try:
        # Reserve the port (bound, not listening: the kernel hands connections only to listening members) so a
        # port held by another program fails here, once, with one message, instead of in every worker.
        probe = reuseport_socket(config.host, config.port, listen=False)
    except OSError as exc:
        print(f"respstream serve: cannot listen on {config.host}:{config.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    # One /metrics for all workers: each writes its samples to this folder, any of them renders the sum
    # (prometheus-client's multiprocess mode reads the variable at import, so it must be set before they start).
    own_metrics_dir = None
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        own_metrics_dir = tempfile.mkdtemp(prefix="respstream-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = own_metrics_dir
    supervisor = _Supervisor(config, workers, log_level)
    previous = {sig: signal.signal(sig, supervisor.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(workers):
            supervisor.start(index)
        probe.close()
        print(banner + f"  workers: {workers} processes (SO_REUSEPORT), instance ids {config.instance_id}-w0.."
              f"w{workers - 1}\n", flush=True)
        supervisor.supervise()
    finally:
        clean = supervisor.stop_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        probe.close()
        if own_metrics_dir is not None:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return 0 if clean else 1
