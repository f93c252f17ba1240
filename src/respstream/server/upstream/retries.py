"""Retrying one generation against an HTTP provider: :class:`RetryingUpstream`, the base of
:class:`~respstream.server.upstream.http.upstream.HttpUpstream` and so of every HTTP family (Chat Completions,
Responses, Anthropic Messages, Gemini).

Why: each adapter holds one concurrency slot for the whole generation and retries an attempt that failed before
its first token while the deadline allows; only which failures are worth a retry (:meth:`_retryable`) and how long
to wait before the next attempt (:meth:`_retry_pause`) differ, and a subclass overrides just those.
:meth:`_with_retries` runs an attempt generator inside the retry loop; the Chat Completions and Responses adapters
instead loop over their attempts in their own generator with :meth:`_take_slot` and :meth:`_pause_or_raise` (the
same policy), so each read passes one generator, not two.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TypeVar, cast

from respstream.server.telemetry.observation import mark_upstream_phase
from respstream.server.upstream.base import GenerationRequest, UpstreamError

__all__ = ["RetryingUpstream"]

_RETRYABLE = {"upstream_unavailable", "upstream_error", "upstream_timeout"}
_T = TypeVar("_T")


class RetryingUpstream:
    """The retry loop; a subclass sets the attributes below and gives :meth:`_acquire` (its concurrency slot)."""

    deadline: float
    retries: int
    retry_backoff: float
    _semaphore: asyncio.Semaphore

    async def _acquire(self) -> None:
        raise NotImplementedError

    def _retryable(self, exc: UpstreamError) -> bool:
        """A failure worth one more attempt: nothing was shown yet, and the upstream (not the request) failed."""
        return (
            exc.before_first_token
            and exc.code in _RETRYABLE
            and (exc.status is None or exc.status >= 500)
            and not exc.message.endswith("deadline exceeded")
        )

    def _retry_pause(self, exc: UpstreamError, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt`` (1 for the first retry): a doubling backoff, or a
        429's ``Retry-After`` when longer (where a subclass retries those: anthropic/adapter.py)."""
        return max(self.retry_backoff * 2.0 ** (attempt - 1), exc.retry_after or 0.0)

    async def _take_slot(self) -> float:
        """The start of a generation: its concurrency slot taken (release it with ``self._semaphore.release()``);
        returns the generation's deadline (loop time), counted from before the queue wait."""
        deadline_at = asyncio.get_running_loop().time() + self.deadline
        await self._acquire()
        mark_upstream_phase("queue")
        return deadline_at

    async def _pause_or_raise(self, exc: UpstreamError, attempt: int, deadline_at: float) -> None:
        """After a failed attempt, before attempt number ``attempt`` (1 for the first retry): raises ``exc`` unless
        :meth:`_retryable` says so, a retry is left and the deadline allows; else waits :meth:`_retry_pause`."""
        if not (self._retryable(exc) and attempt <= self.retries):
            raise exc
        pause = self._retry_pause(exc, attempt)
        if asyncio.get_running_loop().time() + pause >= deadline_at:
            raise exc
        await asyncio.sleep(pause)

    async def _with_retries(
        self, request: GenerationRequest, attempt_once: Callable[[GenerationRequest, float], AsyncIterator[_T]]
    ) -> AsyncGenerator[_T, None]:
        """One concurrency slot for the whole generation; ``attempt_once`` retried (:meth:`_pause_or_raise`).
        Shared by every API these adapters speak; a family may instead loop over its attempts in its own generator
        with :meth:`_take_slot` and :meth:`_pause_or_raise` (chat/adapter.py: one generator hop fewer a read)."""
        deadline_at = await self._take_slot()
        try:
            attempt = 0
            while True:
                once = cast(AsyncGenerator[_T, None], attempt_once(request, deadline_at))
                try:
                    async for item in once:
                        yield item
                    return
                except UpstreamError as exc:
                    attempt += 1
                    await self._pause_or_raise(exc, attempt, deadline_at)
                finally:
                    # Closed here, as we are at `yield` when the pipeline stops: not by asyncio's finalizer (a
                    # wake-up).
                    await once.aclose()
        finally:
            self._semaphore.release()
