"""Giving an upstream's keep-alive connection back once a generation's stream has ended. For both upstream APIs.

How this works: a response closed before its body ended takes its connection down with it; a fully read one returns
the connection to the pool, so the next generation skips the connect (and, for https, the TLS handshake). After the
stream's last event (``[DONE]``, a terminal event) the body's end (normally just the chunked encoding's last chunk)
usually came in the same read: :meth:`ConnectionReturn.give_back` then closes the response at once, no task. Else it
reads the rest of the body in a task (at most ``_MAX_DRAIN`` bytes within ``_DRAIN_TIMEOUT`` s: a server that keeps
talking after its end is not worth keeping) and waits for it ``_DRAIN_INLINE`` s, so that a follow-up request (the
next tool round) finds the connection back in the pool, while a slower server finishes in the background. The
caller already has its ``Finish`` and does not wait longer. :meth:`~ConnectionReturn.settle` waits for the
background ones (tests, benchmarks), :meth:`~ConnectionReturn.aclose` cancels them.
"""

from __future__ import annotations

import asyncio

from respstream.server.upstream.http.stream import HTTPStreamError, StreamResponse

__all__ = ["ConnectionReturn"]

_DRAIN_TIMEOUT = 2.0  # seconds a finished response may take to end its body before its connection is dropped
_MAX_DRAIN = 64 * 1024
_DRAIN_INLINE = 0.005


class ConnectionReturn:
    """The finished responses of one upstream whose body is still being read in the background."""

    __slots__ = ("_drains",)

    def __init__(self) -> None:
        self._drains: set[asyncio.Task[None]] = set()

    async def give_back(self, response: StreamResponse) -> None:
        """After the stream's last event: close ``response`` once its body has ended (see the module docstring)."""
        if response.complete:
            await response.aclose()
            return
        await asyncio.wait((self._drain(response),), timeout=_DRAIN_INLINE)

    def _drain(self, response: StreamResponse) -> asyncio.Task[None]:
        async def drain() -> None:
            try:
                async with asyncio.timeout(_DRAIN_TIMEOUT):
                    left = _MAX_DRAIN
                    while part := await response.read():
                        left -= len(part)
                        if left < 0:
                            break
            except (TimeoutError, HTTPStreamError):
                pass
            finally:
                await response.aclose()

        task = asyncio.get_running_loop().create_task(drain())
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)
        return task

    async def settle(self) -> None:
        """Wait until the background reads have ended and their connections are released. Never raises."""
        if self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the background reads (their responses close, dropping the connections). Never raises."""
        drains, self._drains = list(self._drains), set()
        for task in drains:
            task.cancel()
        if drains:
            await asyncio.gather(*drains, return_exceptions=True)
