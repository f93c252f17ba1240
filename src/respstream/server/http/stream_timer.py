"""One timer per log sender (:class:`StreamTimer`, the base of the SSE and WebSocket senders): keep-alives for an
idle stream, and the cut of a reader that stopped reading.

How this works: one ``call_later`` per stream, re-armed by itself every quarter of the shorter of the keep-alive
interval and the slow-reader limit, does two jobs, so no wait pays for an ``asyncio.timeout``:

- keep-alive: when the sender has been idle (caught up, waiting on ``_waiting``) for ``keepalive_seconds``, it wakes
  it to send one;
- slow reader: when one ``send`` has made no progress for ``slow_reader_timeout_seconds`` (the client stopped
  reading, so uvicorn's flow control holds the send), the sender's task is cancelled with ``cut_slow`` set, and the
  sender calls :meth:`StreamTimer._cut`: the generation is cancelled if it is a foreground response
  (``on_slow_reader``, else ``on_disconnect``; a background one runs on for resumers), and the reader is given a
  terminal ``error`` ``slow_reader`` (numbered last sent + 1, no ``id:``) and the end of the stream, if it takes them
  within a grace period; if not, the connection is aborted.

The sender keeps the timer's view current on its hot path with plain attribute writes (``_sending``, ``last``,
``_active``): no call per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["SLOW_READER_GRACE_SECONDS", "SLOW_READER_TIMEOUT_SECONDS", "StreamTimer", "configured_timeout"]

# Used when the gateway's config has no `slow_reader_timeout_seconds` (0 or less: never cut a reader).
SLOW_READER_TIMEOUT_SECONDS = 30.0
# A cut reader gets at least this long (or the slow-reader limit, if longer) to take its terminal frame.
SLOW_READER_GRACE_SECONDS = 2.0


def configured_timeout(scope: Any) -> float:
    """``slow_reader_timeout_seconds`` of the gateway serving ``scope`` (Starlette puts the app in the scope)."""
    state = getattr(scope.get("app"), "state", None)
    config = getattr(getattr(state, "gateway", None), "config", None)
    return float(getattr(config, "slow_reader_timeout_seconds", SLOW_READER_TIMEOUT_SECONDS))


class StreamTimer:
    """The timer's state and its two jobs; the sender subclass provides the wire messages."""

    on_disconnect: Callable[[], None] | None
    on_slow_reader: Callable[[], None] | None

    def __init__(self, *, after: int, keepalive_seconds: float) -> None:
        self.keepalive = keepalive_seconds
        self.last = after  # the last sequence number sent
        self.cut_slow = False  # this reader was cut for not reading
        self.disconnected = False  # the peer went away
        # The timer's view of the sender.
        self._sending = False  # inside a send (a blocked one is a stalled reader)
        self._seen = after  # `last` when the timer last looked
        self._stall_since = 0.0
        self._active = 0.0  # loop time of the last frame sent (keep-alive is due keepalive seconds after it)
        self._waiting: asyncio.Future[None] | None = None
        self._keepalive_due = False
        self._timer: asyncio.TimerHandle | None = None

    def terminal_message(self, sequence_number: int, code: str, message: str) -> dict[str, Any]:
        """This reader's own terminal (not in the log), in the sender's wire form."""
        raise NotImplementedError

    def close_message(self) -> dict[str, Any]:
        """What ends the stream after a cut, in the sender's wire form."""
        raise NotImplementedError

    def arm_timer(self, limit: float) -> None:
        """Start the per-stream timer (keep-alives and the slow-reader cut) for the current task."""
        me = asyncio.current_task()
        loop = asyncio.get_running_loop()
        period = max(0.01, min(self.keepalive, limit if limit > 0 else self.keepalive) / 4)

        def tick() -> None:
            now = loop.time()
            if self._sending:
                if self.last != self._seen:
                    self._seen, self._stall_since = self.last, now
                elif limit > 0 and now - self._stall_since >= limit + period and not self.disconnected:
                    self.cut_slow = True  # no progress for at least `limit` (the last progress seen was earlier)
                    if me is not None:
                        me.cancel()
                    self._timer = None
                    return
            else:
                self._seen, self._stall_since = self.last, now
                fut = self._waiting
                if fut is not None and not fut.done() and now - self._active >= self.keepalive:
                    self._keepalive_due = True
                    fut.set_result(None)
            self._timer = loop.call_later(period, tick)

        self._active = self._stall_since = loop.time()
        self._timer = loop.call_later(period, tick)

    def disarm_timer(self) -> None:
        self._sending = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _cut(self, send: Any, limit: float) -> None:
        """End a reader that stayed behind: stop a foreground generation, offer the terminal, abort if refused."""
        stop = self.on_slow_reader or self.on_disconnect
        if stop is not None:
            stop()
        message = f"The client read nothing for {limit:g} s (slow_reader_timeout_seconds); the stream was cut."
        try:
            async with asyncio.timeout(max(limit, SLOW_READER_GRACE_SECONDS)):
                await send(self.terminal_message(self.last + 1, "slow_reader", message))
                await send(self.close_message())
            return
        except (TimeoutError, OSError):
            pass
        # Still not reading: drop the connection and what it buffers.
        if self.abort_connection(send):
            await asyncio.sleep(0)  # let the server see the connection lost before the app returns

    def abort_connection(self, send: Any) -> bool:
        """Drop the connection under ``send``; False when it cannot be reached. uvicorn's send is a bound method of
        the request cycle that holds the transport; any other server just sees the app return."""
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        abort = getattr(transport, "abort", None)
        if not callable(abort):
            return False
        abort()
        return True
