"""The direct path of a caught-up SSE reader: the memory store's append sends the new frames itself.

Why: a reader that had caught up waited on a future the next append resolved; its task then woke, resumed its whole
await chain (server, ASGI layer, middleware, route, sender: ~14 frames), read the new entries and sent them. On a
stream whose upstream delivers a few tokens a read that hand-off came once a read, ~17 k of the ~140 k instructions a
read cost (docs/benchmarks.md, issue #16 seventh pass). Here the store calls :meth:`DirectSend.on_append` from the
append, which formats the frames and drives the server's ``send`` coroutine to its end on the spot: uvicorn's ``send``
writes to the transport and returns without suspending, unless flow control has paused the connection.

The reader's task still owns the stream. It waits on one future, resolved only when it is needed:

- the terminal frame went out (the body ended with it), or the log ended without one (deleted);
- a send suspended (the client reads slowly, flow control): the task runs the suspended send to its end
  (:func:`finish_suspended`), with the slow-reader timer watching it as it watches any send, then catches up itself;
- a read too big for one send (``COALESCE_BYTES``: the task sends the frames already made, in bounded pieces), or a
  keep-alive is due (the timer resolves the future);
- anything raised while sending (the task raises it, as its own send would have).

Only uvicorn's own HTTP ``send`` is driven this way (:func:`direct_send_ok`): a coroutine known to keep no state in
the task that runs it. Any other server's ``send`` is awaited by the reader's task as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from respstream.server.events.dialects import Dialect
from respstream.server.events.frames import frames
from respstream.server.store.base import Entry

__all__ = ["DirectSend", "direct_send_ok", "finish_suspended"]


def direct_send_ok(send: Any) -> bool:
    """True for uvicorn's HTTP/1.1 ``send`` (httptools or h11): a bound method of its request-response cycle."""
    owner = getattr(send, "__self__", None)
    return owner is not None and type(owner).__module__.startswith("uvicorn.protocols.http.")


async def finish_suspended(coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
    """Run ``coro``, which suspended on ``yielded`` while driven outside a task, to its end, as a task would: wait for
    the future it yielded, then resume it (it sees the future's outcome itself). Cancelling the caller cancels that
    future, so the coroutine ends with the ``CancelledError``, as in a task."""
    try:
        while True:
            if yielded is None:  # a bare yield (asyncio.sleep(0)): one turn of the loop
                await asyncio.sleep(0)
            else:
                # A task takes the flag down when its coroutine yields a future ("I am waiting on this"); this
                # coroutine yielded it to us, and awaiting it again with the flag up is refused.
                yielded._asyncio_future_blocking = False
                try:
                    await yielded
                except BaseException:
                    # The future's own failure or cancellation (a cancel of this task cancels it) is the
                    # coroutine's to see when resumed; anything else (a cancel that came after the future's
                    # result) is ours.
                    if not yielded.done() or not (yielded.cancelled() or yielded.exception() is not None):
                        raise
            yielded = coro.send(None)
    except StopIteration:
        return
    finally:
        coro.close()  # no-op once it ended; else (an error of ours) its cleanup runs now


class DirectSend:
    """One wait of a caught-up reader: the store's appends call :meth:`on_append` until the task is needed (then
    :attr:`wake` is resolved and appends are left to the task)."""

    __slots__ = ("after_send", "dialect", "ended", "entries_after", "is_ended", "last", "limit", "oversize", "send",
                 "suspended", "wake")

    def __init__(self, *, send: Callable[[dict[str, Any]], Any], dialect: Dialect,
                 entries_after: Callable[[int], list[Entry]], is_ended: Callable[[], bool], last: int, limit: int,
                 after_send: Callable[[int], None]) -> None:
        self.send = send
        self.dialect = dialect
        self.entries_after = entries_after
        self.is_ended = is_ended
        self.last = last  # the last sequence number sent
        self.limit = limit  # bytes a direct send may carry (more: the task sends it in bounded pieces)
        self.after_send = after_send  # told the new `last` after each send that completed
        self.wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.ended = False  # the terminal went out (the body ended with it)
        # A send that suspended: (its coroutine, what it yielded, the last sequence number it carries, terminal).
        self.suspended: tuple[Coroutine[Any, Any, Any], Any, int, bool] | None = None
        # A read too big for one send: its entries and their frames, for the task to send in bounded pieces.
        self.oversize: tuple[list[Entry], list[bytes]] | None = None

    def on_append(self) -> None:
        """Called by the store after every append (and end, delete, close). Never raises into the writer."""
        wake = self.wake
        if wake.done():
            return
        try:
            entries = self.entries_after(self.last)
            if not entries:
                if self.is_ended():
                    wake.set_result(None)  # deleted (or ended with nothing more): the task says so
                return
            bodies = frames(self.dialect, entries)
            if len(bodies) == 1:
                body = bodies[0]
            elif sum(map(len, bodies)) < self.limit:
                body = b"".join(bodies)
            else:  # the task sends it in bounded pieces, these frames (formatted once)
                self.oversize = entries, bodies
                wake.set_result(None)
                return
            if len(body) >= self.limit:
                self.oversize = entries, bodies
                wake.set_result(None)
                return
            last, terminal = entries[-1].sequence_number, entries[-1].terminal
            coro = self.send({"type": "http.response.body", "body": body, "more_body": not terminal})
            try:
                yielded = coro.send(None)
            except StopIteration:
                self.last = last
                self.after_send(last)
                if terminal:
                    self.ended = True
                    wake.set_result(None)
                return
            self.suspended = (coro, yielded, last, terminal)
            wake.set_result(None)
        except Exception as exc:  # (the reader's stream fails as if its own send had raised, never the writer)
            if not wake.done():
                wake.set_exception(exc)
