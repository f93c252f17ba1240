"""One blocking ``XREAD`` per watched response per process, shared by every reader of it in this process.

Why: if each tailing reader blocked in ``XREAD`` itself, every batch would wake N readers that each send a command
of their own (N round trips, N connections). A watch blocks once, keeps the batch it received, and wakes its readers
once per batch; they take their entries from that batch (no round trip) or, if they fell behind it, re-read on the
shared pool. When nothing arrives for a block interval the watch runs ``on_idle`` (the lease check) once for all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from respstream.server.store.base import LogEntry

__all__ = ["StreamWatch"]

# (entries, tombstone seen) or None when the block interval passed with nothing new
BlockingRead = Callable[[int], Awaitable[tuple[list[LogEntry], bool] | None]]


class StreamWatch:
    """Follows one stream from ``start_after`` while it has users; ``done`` once it ended, vanished or failed."""

    def __init__(
        self,
        read: BlockingRead,
        on_idle: Callable[[], Awaitable[bool]],
        on_exit: Callable[[StreamWatch], None],
        start_after: int,
    ) -> None:
        self.top = start_after
        self.batch: list[LogEntry] = []
        self.done = False
        self.error: Exception | None = None
        self.users = 0
        self._read = read
        self._on_idle = on_idle  # returns False when the response is gone
        self._on_exit = on_exit
        self._changed = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _run(self) -> None:
        try:
            while self.users > 0:  # the creator becomes a user before this task first runs
                got = await self._read(self.top)
                if got is None:
                    if not await self._on_idle():
                        break
                    continue
                entries, gone = got
                if entries:
                    self.batch, self.top = entries, entries[-1].sequence_number
                if gone or (entries and entries[-1].terminal):
                    break
                self._wake()
        except Exception as exc:  # StoreUnavailable and friends: every reader gets it
            self.error = exc
        finally:
            self.done = True
            self._on_exit(self)
            self._wake()

    async def wait_beyond(self, last: int) -> list[LogEntry]:
        """Block until the stream moves past ``last`` (or the watch ends). Returns the entries after ``last`` if
        the watch holds them all, else ``[]`` (the caller re-reads). Raises what the watch's reads raised."""
        self.users += 1
        try:
            while self.top <= last and not self.done:
                await self._changed.wait()
        finally:
            self.users -= 1
        if self.error is not None:
            raise self.error
        if self.batch and self.batch[0].sequence_number <= last + 1 <= self.top:
            return [e for e in self.batch if e.sequence_number > last]
        return []
