"""The two redis-py clients a :class:`RedisStore` uses, for standalone Redis or Redis Cluster, from a store URL.

- ``redis://host:port/db``, ``rediss://...``, ``unix://...``: standalone, unless the server says it is a cluster
  node (``INFO cluster`` -> ``cluster_enabled:1``, asked once at startup): then the cluster client below, with that
  node as where discovery starts, and a log line saying so.
- ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://`` with TLS): Redis Cluster; the listed nodes are
  only where discovery starts, the client learns the slot map and follows ``MOVED``/``ASK`` and failovers.

Both give a command client (a bounded pool that waits up to 2 s for a free connection under bursts, 2 s command
timeout) and a client for blocking ``XREAD`` (one connection per blocked reader, socket timeout above the block
time). Connect timeout 1 s, one retry without backoff: an unreachable store fails fast as ``StoreUnavailable``.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

__all__ = ["CLUSTER_SCHEMES", "COMMAND_CONNECTIONS", "cluster_nodes", "detect_cluster", "is_cluster_url",
           "open_clients"]

CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
log = logging.getLogger("respstream.server.store")
_detected: dict[str, str] = {}  # store URL -> the URL to use (asked once per process)


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEMES)


def cluster_nodes(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """``redis+cluster://[user:pass@]h1:p1,h2:p2`` -> ([(h1, p1), (h2, p2)], connection options).

    Raises ``ValueError`` naming what is wrong (no node, a bad port, a database number: a cluster has only db 0).
    """
    scheme, rest = url.split("://", 1)
    netloc, _, path = rest.partition("/")
    options: dict[str, Any] = {"ssl": scheme.startswith("rediss")}
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, password = auth.partition(":")
        options["username"] = unquote(user) or None
        options["password"] = unquote(password) or None
    if path.strip("/") not in ("", "0"):
        raise ValueError(f"store URL {url!r}: Redis Cluster has only database 0 (drop '/{path}')")
    nodes: list[tuple[str, int]] = []
    for part in netloc.split(","):
        if not part:
            continue
        parsed = urlsplit(f"//{part}")
        try:
            port = parsed.port or 6379
        except ValueError:
            raise ValueError(f"store URL {url!r}: node {part!r} has a bad port") from None
        if not parsed.hostname:
            raise ValueError(f"store URL {url!r}: node {part!r} has no host")
        nodes.append((parsed.hostname, port))
    if not nodes:
        raise ValueError(f"store URL {url!r} names no node: redis+cluster://host:port[,host:port...]")
    return nodes, options


def detect_cluster(url: str) -> str:
    """``url`` itself, or its ``redis+cluster://`` form when the server behind a ``redis://``/``rediss://`` URL is
    a Redis Cluster node. Asks ``INFO cluster`` once (1 s timeouts, blocking: called while the store is built at
    startup); a server that cannot be reached now is taken as standalone (the store connects lazily, as before)."""
    if not url.startswith(("redis://", "rediss://")):
        return url
    if url in _detected:
        return _detected[url]
    found = url
    scheme, rest = url.split("://", 1)
    netloc, _, path = rest.partition("/")
    try:  # asked without the database number: a cluster node refuses SELECT of any but 0
        probe = redis.Redis.from_url(f"{scheme}://{netloc}", socket_timeout=1.0, socket_connect_timeout=1.0)
        try:
            enabled = str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
        finally:
            probe.close()
    except redis.RedisError as exc:
        log.warning("store %s: could not ask whether it is a Redis Cluster (%s); using it as standalone Redis",
                    _redact(url), exc)
        enabled = False
    if enabled:
        if path.split("?", 1)[0].strip("/") not in ("", "0"):
            raise ValueError(f"store URL {_redact(url)!r} names a Redis Cluster node, and a cluster has only "
                             f"database 0 (drop '/{path}')")
        found = f"{scheme}+cluster://{netloc}"
        log.info("store %s: the server is a Redis Cluster node (cluster_enabled:1); using the cluster client",
                 _redact(url))
    _detected[url] = found
    return found


def _redact(url: str) -> str:
    """``url`` without its password (for logs and errors)."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return f"{scheme}{sep}{netloc}{slash}{path}"


COMMAND_CONNECTIONS = 64  # per node (cluster) or in all (plain Redis), for the command client


def open_clients(url: str, *, block_ms: int, max_tails: int) -> tuple[Any, Any, bool]:
    """(command client, blocking-read client, is_cluster). Connects lazily, on the first command (after the
    one-time cluster probe of a plain ``redis://`` URL)."""
    url = detect_cluster(url)
    common: dict[str, Any] = {"socket_connect_timeout": 1.0, "retry": Retry(NoBackoff(), 1)}
    block_timeout = block_ms / 1000 + 2.0
    if is_cluster_url(url):
        nodes, options = cluster_nodes(url)
        startup = [ClusterNode(host, port) for host, port in nodes]

        def cluster(socket_timeout: float, max_connections: int) -> RedisCluster:
            # reinitialize_steps=0: a MOVED (after a failover) only re-points that slot. redis-py's default (5)
            # closes every connection to every node on each 5th MOVED — in-flight commands and blocked XREADs on
            # healthy primaries too — which during a failover feeds a storm of re-discoveries.
            return RedisCluster(startup_nodes=list(startup), socket_timeout=socket_timeout,
                                max_connections=max_connections, require_full_coverage=True,
                                reinitialize_steps=0, **common, **options)

        return cluster(2.0, COMMAND_CONNECTIONS), cluster(block_timeout, max_tails), True
    # Waiting for a free pooled connection is not Redis being down (that is the 1 s connect timeout): hundreds of
    # readers resuming at once on a loaded machine may queue for one a few seconds.
    pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=COMMAND_CONNECTIONS, timeout=4.0,
                                                    socket_timeout=2.0, **common)
    commands = aioredis.Redis(connection_pool=pool, **common)
    commands.auto_close_connection_pool = True  # closing the client closes the pool it was handed
    blocking = aioredis.from_url(url, socket_timeout=block_timeout, max_connections=max_tails, **common)
    return commands, blocking, False
