"""The schema pool is shared fairly across clients and a check's deadline starts when it runs (issue 42, X1).

At main, two slow checks of one client held both validation processes and the valid structured answers of other
clients failed "checking it took longer than 5 s" while they were still waiting. The processes here are real
validation processes; the slow check is a valid schema within every cap whose answer takes seconds to check.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from respstream.server import request_limits
from respstream.server.inputs import schema_pool
from respstream.server.inputs.fair_share import FairShare, PoolBusy, charge_to, client_of
from respstream.server.request_limits import WorkLimits

SECONDS = 3.0
# uniqueItems over objects: jsonschema compares every pair (unhashable items), seconds for 20,000 of them.
SLOW = {"op": "answer", "name": "t", "schema": json.dumps({"type": "array", "uniqueItems": True}),
        "text": json.dumps([{"k": i} for i in range(20_000)])}
FAST = {"op": "answer", "name": "t", "schema": json.dumps({"type": "object", "required": ["a"]}),
        "text": json.dumps({"a": 1})}


@pytest.fixture(autouse=True)
def limits() -> Iterator[None]:
    request_limits.install(WorkLimits(validation_seconds=SECONDS, validation_workers=2))
    yield
    request_limits.install(WorkLimits())


async def _as(client: str, request: dict[str, Any]) -> tuple[str | None, float]:
    charge_to(client)  # what authenticate() does for a request: this task and its children count for `client`
    began = time.monotonic()
    problem = await schema_pool.ask(request)
    return problem, time.monotonic() - began


async def _in_context(client: str, request: dict[str, Any]) -> tuple[str | None, float]:
    return await asyncio.create_task(_as(client, request), context=contextvars.copy_context())


def test_one_clients_slow_checks_do_not_fail_another_clients_valid_answers() -> None:
    async def scenario() -> list[tuple[str | None, float]]:
        attacker = [asyncio.ensure_future(_in_context("peer:198.51.100.7", SLOW)) for _ in range(6)]
        await asyncio.sleep(0.3)  # the attacker holds both processes and has four more checks queued
        victims = [asyncio.ensure_future(_in_context(f"key:victim{i}", FAST)) for i in range(3)]
        results = await asyncio.gather(*victims)
        for task in attacker:
            task.cancel()
        await asyncio.gather(*attacker, return_exceptions=True)
        return results

    results = asyncio.run(scenario())
    problems = [problem for problem, _ in results]
    assert problems == [None, None, None], results  # valid answers pass, however long they waited for a process
    # each waited for at most one of the attacker's checks to end (killed at the deadline), not for all six
    assert max(waited for _, waited in results) < 3 * SECONDS, results


def test_a_check_still_gets_killed_at_its_own_deadline() -> None:
    problem, took = asyncio.run(_in_context("peer:a", SLOW))
    assert problem == f"checking it took longer than {SECONDS:g} s", problem
    assert took < SECONDS + 2.5


def test_fair_share_grants_a_freed_slot_to_the_client_with_fewest() -> None:
    async def scenario() -> list[str]:
        share = FairShare(2)
        granted: list[str] = []

        async def take(client: str) -> None:
            await share.acquire(client, wait=10)
            granted.append(client)

        await take("a")
        await take("a")
        queued = [asyncio.create_task(take(c)) for c in ("a", "a", "b", "c")]
        await asyncio.sleep(0)
        for holder in ("a", "a", "b"):  # a's two checks end, then b's
            share.release(holder)
            await asyncio.sleep(0)
        await asyncio.wait_for(asyncio.gather(*queued[:1]), 1)
        for task in queued:
            task.cancel()
        return granted

    granted = asyncio.run(scenario())
    # b and c (nothing in use, never served) go before a's queued checks although they came after them
    assert granted == ["a", "a", "b", "c", "a"], granted


def test_fair_share_wait_is_bounded_and_cancellation_frees_the_place() -> None:
    async def scenario() -> None:
        share = FairShare(1)
        await share.acquire("a", wait=1)
        with pytest.raises(PoolBusy):
            await share.acquire("b", wait=0.05)
        waiting = asyncio.create_task(share.acquire("c", wait=10))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        share.release("a")
        assert share.busy == 0
        await share.acquire("d", wait=0.05)  # nobody else holds or waits: at once

    asyncio.run(scenario())
    assert client_of() == "anonymous"  # outside a request


def test_a_request_is_counted_for_its_address_block_or_its_key() -> None:
    """What authenticate() names for the pool on an open gateway: the address block (IPv4 address, IPv6 block)."""
    from starlette.requests import Request

    from respstream.server.http.peer_limit import client_key

    from .helpers import make_app

    gateway = make_app().state.gateway

    def client_for(host: str) -> str:
        scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "client": (host, 1234)}
        return contextvars.copy_context().run(lambda: (gateway.authenticate(Request(scope)), client_of())[1])

    assert client_for("203.0.113.9") == "peer:203.0.113.9"
    # the IPv6 block is whatever the connection limits count a client as (http/peer_limit.py), one for both
    block = f"peer:{client_key('2001:db8:1:2::5')}"
    assert client_for("2001:db8:1:2::5") == client_for("2001:db8:1:2:ffff::1") == block
