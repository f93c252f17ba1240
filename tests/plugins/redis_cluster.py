"""A real local Redis Cluster (Debian ``redis-server`` in cluster mode): 3 primaries + 3 replicas on loopback ports.

Built with ``redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes``, then waited on until every node
reports ``cluster_state:ok``. ``cluster-node-timeout`` is 1 s so a killed primary's replica takes over within a few
seconds (the chaos test relies on that). Ask for the ``redis_cluster`` fixture (session scoped; ``.url`` is a
``redis+cluster://`` store URL) or build a private :class:`RedisCluster` for a test that kills nodes.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.shared_server import SharedServer

__all__ = ["RedisCluster", "redis_cluster"]

NODE_TIMEOUT_MS = 1000


def _cluster_port(taken: set[int]) -> int:
    """A free loopback port whose cluster-bus port (port + 10000) is free too, so both stay below 65536."""
    while True:
        port = random.randrange(20000, 55000)
        if port in taken or port + 10000 in taken:
            continue
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        taken.update((port, port + 10000))
        return port


def _cli(port: int, *args: str, timeout: float = 10) -> str:
    result = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True,
                            text=True, timeout=timeout)
    return result.stdout


def _in_sync(port: int) -> bool | None:
    """A primary: False. A replica: True once its link is up and no sync is in progress; else None."""
    info = _cli(port, "INFO", "replication")
    if "role:master" in info:
        return False
    return True if "master_link_status:up" in info and "master_sync_in_progress:0" in info else None


class RedisCluster:
    """Six ``redis-server`` processes (no persistence) joined into one cluster."""

    def __init__(self, nodes: int = 6) -> None:
        for binary in ("redis-server", "redis-cli"):
            if shutil.which(binary) is None:
                pytest.fail(f"{binary} is not installed: `make test` installs it (Debian package redis-server)")
        taken: set[int] = set()
        self.ports = [_cluster_port(taken) for _ in range(nodes)]
        self.dir = Path(tempfile.mkdtemp(prefix="respstream-cluster-"))
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def _start_node(self, port: int) -> None:
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--cluster-enabled", "yes", "--cluster-config-file", str(self.dir / f"nodes-{port}.conf"),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--dir", str(self.dir),
                # the first full sync of a replica starts at once (default: 5 s later, to batch replicas), so a
                # replica holds the data before the test writes: a failover then loses nothing acknowledged
                "--repl-diskless-sync-delay", "0"]
        self.processes[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self) -> None:
        for port in self.ports:
            self._start_node(port)
        deadline = time.monotonic() + 10
        for port in self.ports:
            while _cli(port, "PING").strip() != "PONG":
                if time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"cluster node 127.0.0.1:{port} did not answer PING within 10 s")
                time.sleep(0.05)
        create = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
                                 "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, text=True,
                                timeout=60)
        if create.returncode != 0:
            self.stop()
            pytest.fail(f"redis-cli --cluster create failed: {create.stdout[-1500:]} {create.stderr[-500:]}")
        self.wait_ok()

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every live node says ``cluster_state:ok`` and every replica is in sync (its link to its primary up,
        no full sync running)."""
        deadline = time.monotonic() + timeout
        while True:
            live = [p for p, proc in self.processes.items() if proc.poll() is None]
            synced = [_in_sync(p) for p in live]  # False: a primary; None: a replica still syncing
            if (all("cluster_state:ok" in _cli(p, "CLUSTER", "INFO") for p in live) and None not in synced
                    and synced.count(True) >= len(live) // 2):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the Redis Cluster did not reach cluster_state:ok with its replicas in sync within "
                            f"{timeout:g} s")
            time.sleep(0.1)

    def primary_for(self, key: str) -> int:
        """The port of the primary that serves ``key``'s slot now."""
        slot = int(_cli(self.ports[0], "CLUSTER", "KEYSLOT", key).strip())
        for line in _cli(self.ports[0], "CLUSTER", "NODES").splitlines():
            fields = line.split()
            if "master" not in fields[2] or "fail" in fields[2]:
                continue
            for span in fields[8:]:
                lo, _, hi = span.partition("-")
                if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                    return int(fields[1].split("@")[0].rsplit(":", 1)[1])
        raise LookupError(f"no primary serves slot {slot}")

    def kill(self, port: int) -> None:
        """SIGKILL one node (a crash, not a shutdown)."""
        proc = self.processes[port]
        proc.kill()
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


_shared = SharedServer(RedisCluster)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    with _shared.use() as cluster:
        yield cluster
