"""One MCP client session, run in a task of its own so that whatever breaks inside the SDK stays inside it.

Why: the ``mcp`` SDK's ``Client`` keeps an anyio task group open for the session's life. Entered from the pipeline,
that group's cancel scope wrapped the whole response: when its reader task died (a ``RecursionError`` on an answer
nested 5,000 deep), the group cancelled the pipeline's task, and the response ended ``cancelled`` with its
``mcp_call`` left ``in_progress`` (issue 42, X2). Here the group lives in the session's own task; the pipeline hands
it work and waits for the answer, and a session that dies fails the work in flight (and all later work) with
:class:`McpSessionLost`, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["McpSession", "McpSessionLost"]

log = logging.getLogger("respstream.server")
_CLOSE_SECONDS = 5.0  # a polite close (the SDK ends the session with the server) may take this long, then it is cut

Opener = Callable[[contextlib.AsyncExitStack], Awaitable[Any]]
Work = Callable[[Any], Awaitable[Any]]


class McpSessionLost(Exception):
    """The session's task ended (the SDK crashed, the server went away): no call on it can complete."""


def _describe(exc: BaseException) -> str:
    """The innermost cause of an SDK failure (task groups wrap it in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpSession:
    """``await start()`` opens the session (``opener`` enters the SDK's contexts on the given stack and returns the
    client); ``await run(work)`` runs ``work(client)`` in the session's task; ``await aclose()`` ends it."""

    def __init__(self, opener: Opener, name: str) -> None:
        self._opener = opener
        self._name = name
        self._jobs: asyncio.Queue[tuple[Work, asyncio.Future[Any]] | None] = asyncio.Queue()
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Future[Any]] = set()
        self._lost: str | None = None
        self._busy = False  # a call is running in the session's task
        self._closing = False

    async def start(self) -> None:
        """Raises what opening the session raised (unreachable server, refused address, not an MCP server)."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(), name=f"mcp session {self._name}")
        await asyncio.shield(self._ready)

    async def run(self, work: Work) -> Any:
        """``work(client)``'s result, computed in the session's task. Raises what ``work`` raised, or
        :class:`McpSessionLost`."""
        if self._lost is not None or self._task is None or self._task.done():
            raise McpSessionLost(self._lost or "the session is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.add(future)
        self._jobs.put_nowait((work, future))
        try:
            return await future
        finally:
            self._pending.discard(future)

    async def _own(self) -> None:
        assert self._ready is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._opener(stack)
                self._ready.set_result(None)
                while (job := await self._jobs.get()) is not None:
                    work, future = job
                    if future.done():  # its caller stopped waiting (the response was cancelled)
                        continue
                    self._busy = True
                    try:
                        result = await work(client)
                    except Exception as exc:  # the call's own failure: the session goes on
                        if not future.done():
                            future.set_exception(exc)
                    else:
                        if not future.done():
                            future.set_result(result)
                    finally:
                        self._busy = False
        except BaseException as exc:  # the SDK's group cancels this task when its reader dies: end honestly
            self._lost = _describe(exc)
            failure = McpSessionLost(self._lost)
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else failure)
            for future in self._pending:
                if not future.done():
                    future.set_exception(failure)
            log.debug("MCP session %s ended: %s", self._name, self._lost, exc_info=True)
            if isinstance(exc, asyncio.CancelledError) and self._closing:
                raise
        finally:
            self._lost = self._lost or "the session is closed"
            for future in self._pending:  # work handed in while the session was closing: nobody will run it
                if not future.done():
                    future.set_exception(McpSessionLost(self._lost))

    async def aclose(self) -> None:
        """End the session: politely when it is idle, cut after ``_CLOSE_SECONDS`` otherwise. Never raises."""
        task = self._task
        if task is None or task.done():
            return
        self._closing = True
        self._jobs.put_nowait(None)
        # A call still running belongs to a response that has ended (cancelled): cut it, do not wait for it.
        done, _ = await asyncio.wait({task}, timeout=0 if self._busy else _CLOSE_SECONDS)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
