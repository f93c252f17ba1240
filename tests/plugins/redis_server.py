"""A real ``redis-server`` (Debian package) on a free loopback port, for any test that needs Redis.

Register it once in the top conftest (``pytest_plugins = ["plugins.redis_server"]``) and ask for the
``redis_server`` fixture (session scoped, yields a ``RedisServer`` with ``.url``). ``RedisServer`` can also be used
directly for a private server a test may stop and start (the "Redis unavailable" tests do).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from plugins.shared_server import SharedServer

__all__ = ["RedisServer", "free_port", "redis_server"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process without persistence; ``start()`` waits until it answers PING."""

    def __init__(self, port: int | None = None, *, data_dir: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: `make test` installs it (Debian package redis-server)")
        self.binary = binary
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.data_dir = data_dir  # its working dir (a replica's full sync writes dump.rdb there); None: the cwd

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        if self.data_dir is not None:
            args += ["--dir", self.data_dir]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not _ping(self.port):
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                pytest.fail(f"redis-server exited with {self.process.returncode}: {err.strip()}")
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"redis-server did not answer PING on 127.0.0.1:{self.port} within 10 s")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None


_shared = SharedServer(RedisServer)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with _shared.use() as server:
        yield server
