"""When one attempt of a generation must end, for both upstream APIs (chat/adapter.py, responses/adapter.py).

How this works: the retrying generator fixes ``deadline_at`` (loop time) once per generation; an attempt keeps it in
:attr:`GenerationDeadline.at`. With ``deadline_from_first_token`` (the embedded model) ``at`` is infinite until the
first chunk goes out, then ``seconds`` from then: the prompt read is bounded by the context size, not by time, and
the idle timer still ends a server that sends nothing at all.

"Goes out" is either the attempt yielding a batch (it calls :meth:`GenerationDeadline.first_out`) or the direct hook
handing a read to the pipeline's sink from the connection's data callback while the attempt sleeps
(:meth:`~GenerationDeadline.watch` wraps the hook): then the deadline starts there and the attempt is woken once, so
that its next wait is timed.

Which waits need a timer of their own (:func:`untimed_margin`): a plain read is one read, so when the deadline is
more than ``idle_timeout`` away the response's idle timer ends any stall first, and arming and cancelling a timer per
read would cost more than the rest of the read. A direct read is many reads the sink applies while the attempt
sleeps, as long as the answer is plain text: only an infinite deadline can go without a timer there.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

__all__ = ["GenerationDeadline", "untimed_margin"]


def untimed_margin(idle_timeout: float, *, direct: bool) -> float:
    """An attempt's wait needs no timer while ``deadline.at - now >= `` this (see the module docstring)."""
    return math.inf if direct else idle_timeout


class GenerationDeadline:
    """``at``: the loop time the attempt must end by (``inf``: not counting yet). ``waiting``: it starts at the first
    chunk out, which has not gone out yet."""

    __slots__ = ("_loop", "_seconds", "at", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline_at: float, seconds: float, *,
                 from_first_token: bool) -> None:
        self._loop = loop
        self._seconds = seconds
        self.waiting = from_first_token
        self.at = math.inf if from_first_token else deadline_at

    def first_out(self) -> None:
        """A chunk went out: when the deadline counts from the first one, it starts now (once)."""
        if self.waiting:
            self.waiting = False
            self.at = self._loop.time() + self._seconds

    def watch(self, take: Callable[[bytes], bool], gave_out: Callable[[], bool]) -> Callable[[bytes], bool]:
        """The direct hook ``take`` for an attempt whose deadline has not started: when a read it took gave out the
        first chunk (``gave_out()``: to the sink), the deadline starts and the attempt is woken (False, nothing
        kept: its read returns None) to time its next wait. ``take`` itself once the deadline counts."""
        if not self.waiting:
            return take

        def take_watched(raw: bytes) -> bool:
            if not self.waiting:
                return take(raw)
            if not take(raw):
                return False  # (kept for the attempt, which yields it and starts the deadline)
            if not gave_out():
                return True
            self.first_out()
            return False

        return take_watched
