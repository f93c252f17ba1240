"""Runs schema checks in validation processes with a deadline that really fires (kill, not a flag).

How this works: :func:`ask` sends one request line to an idle :mod:`~respstream.server.inputs.schema_worker` process
(starting one when none is idle, at most ``validation_workers`` at once, handed out fairly across clients by
:mod:`~respstream.server.inputs.fair_share`; the deadline starts when the check does) and waits for its reply line in a
dedicated thread; the event loop only awaits the thread. A timer kills the process when the deadline passes, so the
read ends at once; the caller gets a problem naming the deadline, and the next check starts a fresh process. A
process that dies (memory limit, crash) is reported the same way, never as a traceback. The processes are plain
``subprocess.Popen`` children, not tied to any event loop, and are reused between requests.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from respstream.server import request_limits
from respstream.server.inputs.fair_share import FairShare, PoolBusy, client_of

__all__ = ["ask"]

_THREADS = 64  # at least validation_workers of every event loop in the process


class _Process:
    def __init__(self, memory_bytes: int) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "respstream.server.inputs.schema_worker", str(memory_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.killed = False

    def ask(self, line: bytes) -> bytes:
        assert self.popen.stdin is not None and self.popen.stdout is not None
        try:
            self.popen.stdin.write(line)
            self.popen.stdin.flush()
        except OSError:
            return b""
        return self.popen.stdout.readline()

    def kill(self) -> None:
        self.killed = True
        self.popen.kill()

    def close(self) -> None:
        self.popen.kill()
        self.popen.wait()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                stream.close()


class _Pool:
    def __init__(self) -> None:
        self._idle: list[_Process] = []
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def executor(self) -> ThreadPoolExecutor:
        """Threads that wait for the processes' replies; how many checks run at once is :class:`FairShare`'s call
        (one per event loop), so this never queues a check of its own."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="schema-check")
            return self._executor

    def run(self, line: bytes, deadline: float, seconds: float, memory_bytes: int) -> dict[str, Any]:
        with self._lock:
            process = self._idle.pop() if self._idle else None
        if process is None:
            process = _Process(memory_bytes)
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), process.kill)
        timer.start()
        try:
            reply = process.ask(line)
        finally:
            timer.cancel()
        if not reply:
            process.close()
            if process.killed:
                return {"problem": f"checking it took longer than {seconds:g} s"}
            return {"problem": "checking it needs more memory or stack than a validation process may use"}
        with self._lock:
            self._idle.append(process)
        decoded: dict[str, Any] = json.loads(reply)
        return decoded

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for process in idle:
            process.close()


_pool = _Pool()
atexit.register(_pool.close)
_shares: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairShare] = weakref.WeakKeyDictionary()
_WAIT_TURNS = 4  # a check waits for a process at most this many validation deadlines (fair share: see fair_share.py)


def _share(loop: asyncio.AbstractEventLoop, capacity: int) -> FairShare:
    share = _shares.get(loop)
    if share is None:
        share = _shares[loop] = FairShare(capacity)
    share.capacity = capacity
    return share


async def ask(request: dict[str, Any]) -> str | None:
    """The worker's problem for ``request`` (``None``: none). The check gets ``limits.validation_seconds`` from when
    it starts in a process; the wait for a process (fair across clients: :func:`fair_share.client_of`) is bounded
    apart, by ``_WAIT_TURNS`` deadlines."""
    limits = request_limits.current()
    seconds = limits.validation_seconds
    line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
    loop = asyncio.get_running_loop()
    share = _share(loop, limits.validation_workers)
    client = client_of()
    wait = _WAIT_TURNS * seconds
    try:
        await share.acquire(client, wait)
    except PoolBusy:
        return f"no validation process was free within {wait:g} s (the checks of other clients came first)"
    deadline = time.monotonic() + seconds  # counted from here: the wait above is nobody's deadline
    running = loop.run_in_executor(_pool.executor(), _pool.run, line, deadline, seconds,
                                   limits.validation_memory_bytes)
    running.add_done_callback(lambda _: share.release(client))  # the slot is free when the process is, not before
    reply = await asyncio.shield(running)
    problem = reply.get("problem")
    return problem if isinstance(problem, str) else None
