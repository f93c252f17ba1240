"""Runs schema checks in validation processes with a deadline that really fires (kill, not a flag).

How this works: :func:`ask` sends one request line to an idle :mod:`~respstream.server.inputs.schema_worker` process
(starting one when none is idle, at most ``validation_workers`` at once) and waits for its reply line in a
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
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from respstream.server import request_limits

__all__ = ["ask"]


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
        self._size = 0

    def executor(self, size: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None or self._size != size:
                self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="schema-check")
                self._size = size
            return self._executor

    def run(self, line: bytes, deadline: float, seconds: float, memory_bytes: int) -> dict[str, Any]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return {"problem": f"no validation process was free within {seconds:g} s"}
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


async def ask(request: dict[str, Any]) -> str | None:
    """The worker's problem for ``request`` (``None``: none), within ``limits.validation_seconds``."""
    limits = request_limits.current()
    seconds = limits.validation_seconds
    line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
    deadline = time.monotonic() + seconds
    executor = _pool.executor(limits.validation_workers)
    loop = asyncio.get_running_loop()
    reply = await loop.run_in_executor(executor, _pool.run, line, deadline, seconds, limits.validation_memory_bytes)
    problem = reply.get("problem")
    return problem if isinstance(problem, str) else None
