"""Every Redis call of the store goes through these two: ``guard`` (a connection failure of any kind becomes
``StoreUnavailable``) and ``bounded`` (a call that takes too long is given up on, not cancelled)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

from redis.exceptions import ClusterError, ReadOnlyError, RedisClusterException, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from respstream.server.store.base import StoreUnavailable

__all__ = ["CALL_BOUND", "bounded", "guard"]

T = TypeVar("T")


@contextlib.contextmanager
def guard() -> Iterator[None]:
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, OSError, ClusterError, TryAgainError, RedisClusterException,
            ReadOnlyError) as exc:  # READONLY: the node became a replica (a failover in progress); retried
        raise StoreUnavailable(f"Redis is unavailable: {exc}") from exc
    except (AttributeError, RuntimeError) as exc:
        # redis-py's async connections race with their own disconnect while a cluster node fails over (a write on
        # a connection whose writer was just dropped: AttributeError; uvloop: "handler is closed" RuntimeError).
        # Inside this guard only Redis calls run, so these mean "the connection broke": a store outage, retried.
        raise StoreUnavailable(f"Redis connection broke: {type(exc).__name__}: {exc}") from exc


CALL_BOUND = 5.0  # seconds one store script may take, retries included


async def bounded(call: Awaitable[T], seconds: float = CALL_BOUND) -> T:
    """``await call``, giving up after ``seconds`` with ``StoreUnavailable``, WITHOUT cancelling it.

    Why not ``asyncio.timeout``: cancelling a redis-py cluster command while it re-discovers the cluster (its
    ``initialize()`` after a node failed) takes the ``BaseException`` path there, which closes every connection to
    every node, in-flight commands and blocked ``XREAD``s on healthy primaries included; they fail, flag the client
    for another re-discovery, and a failover turns into a storm that keeps healthy slots failing for longer than a
    lease. Left running, the call ends by itself within redis-py's socket timeouts; the scripts it runs are
    idempotent (a re-sent append is recognised, a renewal just renews), so giving up on the result is safe.
    """
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.wait_for(asyncio.shield(task), seconds)
    except TimeoutError:
        task.add_done_callback(_consume)
        raise StoreUnavailable(f"Redis did not answer within {seconds:g} s") from None
    except BaseException:  # our caller was cancelled: the call goes on, and its outcome is still retrieved
        task.add_done_callback(_consume)
        raise


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve a given-up call's outcome (no "exception was never retrieved" noise)."""
    if not task.cancelled():
        task.exception()
