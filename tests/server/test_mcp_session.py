"""An MCP session's task keeps whatever breaks inside it (issue 42, X2): :class:`McpSession` alone, with an anyio
task group standing in for the SDK's (the real SDK runs in tests/server/test_mcp_failures.py)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import anyio
import pytest

from respstream.server.tools.mcp_session import McpSession, McpSessionLost


class _Boom(Exception):
    pass


async def _plain(stack: contextlib.AsyncExitStack) -> Any:
    return "client"


def test_work_runs_in_the_session_and_its_own_failure_leaves_the_session_alive() -> None:
    async def scenario() -> None:
        session = McpSession(_plain, "s")
        await session.start()

        async def fail(client: Any) -> Any:
            raise _Boom(client)

        with pytest.raises(_Boom):
            await session.run(fail)
        assert await session.run(lambda client: asyncio.sleep(0, client + "!")) == "client!"
        await session.aclose()
        with pytest.raises(McpSessionLost):
            await session.run(lambda client: asyncio.sleep(0, 1))

    asyncio.run(scenario())


def test_a_crashing_task_group_fails_the_call_not_the_caller() -> None:
    """The SDK's reader dies: its task group cancels the session's task. The caller's task is not cancelled; its
    call fails with the reader's error, and so does every later call."""

    async def opener(stack: contextlib.AsyncExitStack) -> Any:
        group = await stack.enter_async_context(anyio.create_task_group())

        async def reader() -> None:
            await asyncio.sleep(0.05)
            raise RecursionError("maximum recursion depth exceeded while decoding")

        group.start_soon(reader)
        return "client"

    async def scenario() -> None:
        session = McpSession(opener, "s")
        await session.start()
        with pytest.raises(McpSessionLost, match="RecursionError"):
            await session.run(lambda client: asyncio.sleep(30))
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        await asyncio.sleep(0.01)  # the caller goes on: no cancellation is pending for it
        with pytest.raises(McpSessionLost, match="RecursionError"):
            await session.run(lambda client: asyncio.sleep(0, 1))
        await session.aclose()

    asyncio.run(scenario())


def test_opening_failures_reach_start_and_closing_a_busy_session_does_not_wait() -> None:
    async def refused(stack: contextlib.AsyncExitStack) -> Any:
        raise _Boom("no MCP server there")

    async def scenario() -> float:
        with pytest.raises(_Boom):
            await McpSession(refused, "r").start()
        session = McpSession(_plain, "s")
        await session.start()
        stuck = asyncio.create_task(session.run(lambda client: asyncio.sleep(30)))
        await asyncio.sleep(0.01)
        stuck.cancel()  # the response ended while its call was running
        began = asyncio.get_running_loop().time()
        await session.aclose()
        return asyncio.get_running_loop().time() - began

    assert asyncio.run(scenario()) < 1.0
