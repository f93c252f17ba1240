"""Retrying one generation against an HTTP provider: :class:`RetryingUpstream`, the base of
:class:`~respstream.server.upstream.http.upstream.HttpUpstream` and so of every HTTP family (Chat Completions,
Responses, Anthropic Messages, Gemini).

Why: each adapter holds one concurrency slot for the whole generation and retries an attempt that failed before
its first token while the deadline allows; only which failures are worth a retry (:meth:`_retryable`) and how long
to wait before the next attempt (:meth:`_retry_pause`) differ, and a subclass overrides just those. The retry loop
is the generator the caller iterates (no layer around it), so it costs nothing per read.
"""

from __future__ import annotations

import asyncio
import contextlib
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

    async def _with_retries(
        self, request: GenerationRequest, attempt_once: Callable[[GenerationRequest, float], AsyncIterator[_T]]
    ) -> AsyncGenerator[_T, None]:
        """One concurrency slot for the whole generation; ``attempt_once`` retried after :meth:`_retry_pause` while
        :meth:`_retryable` says so and the deadline allows. Shared by every API these adapters speak."""
        loop = asyncio.get_running_loop()
        deadline_at = loop.time() + self.deadline
        await self._acquire()
        mark_upstream_phase("queue")
        try:
            attempt = 0
            while True:
                try:
                    # Closed here, as we are at `yield` when the pipeline stops: not by asyncio's finalizer (a wake-up).
                    once = cast(AsyncGenerator[_T, None], attempt_once(request, deadline_at))
                    async with contextlib.aclosing(once) as items:
                        async for item in items:
                            yield item
                    return
                except UpstreamError as exc:
                    if not (self._retryable(exc) and attempt < self.retries):
                        raise
                    attempt += 1
                    pause = self._retry_pause(exc, attempt)
                    if loop.time() + pause >= deadline_at:
                        raise
                    await asyncio.sleep(pause)
        finally:
            self._semaphore.release()
