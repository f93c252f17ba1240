"""The ASGI response that sends one response's event log as SSE: a cursor over the store, live.

How this works: it reads every entry after the cursor, sends each as one frame (one ``send`` per event: live tokens
arrive one at a time), and when it has caught up waits for the next appended batch. It ends after the terminal
entry. A stream never ends without a terminal: when the response is deleted before its terminal reached this reader,
or the store fails mid-stream, the reader gets an ``error`` of its own (``cancelled`` / ``store_unavailable``, see
:func:`writer.reader_terminal_frame`) and the stream closes. A client that goes away stops the sender, which calls
``on_disconnect`` (the service then cancels a foreground generation; a background one runs on): the gateway's
httptools protocol says so through a hook (http_guard.DISCONNECT_HOOK), elsewhere a watcher task reads
``receive()`` until ``http.disconnect``.

One timer per stream (:class:`~respstream.server.http.stream_timer.StreamTimer`, this class's base) sends
``: keep-alive`` when the sender has been idle for ``keepalive_seconds``, and cuts a reader whose ``send`` has made no
progress for ``slow_reader_timeout_seconds`` (a foreground generation is then cancelled; the reader gets a terminal
``error`` ``slow_reader`` if it takes it within a grace period, else the connection is aborted).

Buffering per reader is bounded: the log is shared and a reader only holds its cursor; what waits for a stalled
client is uvicorn's transport buffer (paused at its high-water mark) and the kernel's socket buffers.

Stores with ``waiter`` (the memory store) are followed directly, compact delta entries and all; others through their
``tail()`` iterator, pumped into a bounded queue so a keep-alive timeout never tears the iterator down. A reader of the
memory store that has caught up, on uvicorn, is sent to by the store's appends themselves (the direct path,
:mod:`~respstream.server.http.direct_send`): its task wakes for the terminal, a send held by flow control, a keep-alive,
or an error, not for every read of the upstream.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import itertools
from collections.abc import Callable
from typing import Any

from respstream.server.events.dialects import Dialect
from respstream.server.events.frames import frame, frames, reader_terminal_frame
from respstream.server.http.direct_send import DirectSend, direct_send_ok, finish_suspended
from respstream.server.http.http_guard import DISCONNECT_HOOK
from respstream.server.http.stream_timer import StreamTimer, configured_timeout
from respstream.server.store.base import Entry, Store, StoreUnavailable

__all__ = ["COALESCE_BYTES", "SSE_HEADERS", "EventStreamResponse"]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"keep-alive"),
]
_KEEPALIVE = {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
_END = object()
# Frames ready together go out in one send up to this many bytes (a reader catching up on a long log gets
# bounded chunks, not one huge one).
COALESCE_BYTES = 32 * 1024
STORE_RETRY_SECONDS = 3.0  # how long a reader retries a failing store before its terminal `store_unavailable`


class EventStreamResponse(StreamTimer):
    direct = True  # use the direct path where it applies (tests compare it with the task's own sends)

    def __init__(
        self,
        *,
        store: Store,
        response_id: str,
        after: int,
        dialect: Dialect,
        keepalive_seconds: float,
        headers: list[tuple[bytes, bytes]],
        on_disconnect: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
        on_slow_reader: Callable[[], None] | None = None,
        slow_reader_timeout: float | None = None,
    ) -> None:
        """``slow_reader_timeout``: None reads the app's config (``slow_reader_timeout_seconds``); 0 disables.
        ``on_slow_reader`` defaults to ``on_disconnect`` (both cancel a foreground generation)."""
        super().__init__(after=after, keepalive_seconds=keepalive_seconds)
        self.store = store
        self.response_id = response_id
        self.after = after
        self.dialect = dialect
        self.headers = SSE_HEADERS + headers
        self.on_disconnect = on_disconnect
        self.on_close = on_close
        self.on_slow_reader = on_slow_reader
        self.slow_reader_timeout = slow_reader_timeout
        self._ended = False  # the body's end went out with the terminal frame (no separate empty send)
        self._direct = False  # caught up, the store's appends send the frames (server/http/direct_send.py)

    # -- what goes on the wire (a transport beside SSE overrides these three; websocket/sender.py) -----------------
    def entry_message(self, entry: Entry) -> dict[str, Any]:
        """The ASGI message carrying one log entry."""
        return {"type": "http.response.body", "body": frame(self.dialect, entry), "more_body": True}

    def keepalive_message(self) -> dict[str, Any] | None:
        """What an idle stream sends every ``keepalive_seconds`` (None: nothing)."""
        return _KEEPALIVE

    def terminal_message(self, sequence_number: int, code: str, message: str) -> dict[str, Any]:
        """This reader's own terminal (not in the log), see :func:`writer.reader_terminal_frame`."""
        return {"type": "http.response.body", "more_body": True,
                "body": reader_terminal_frame(self.dialect, sequence_number, code, message)}


    def close_message(self) -> dict[str, Any]:
        """What ends the stream after a cut."""
        return {"type": "http.response.body", "body": b"", "more_body": False}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        me = asyncio.current_task()
        limit = configured_timeout(scope) if self.slow_reader_timeout is None else self.slow_reader_timeout

        def gone() -> None:
            self.disconnected = True
            if me is not None:
                me.cancel()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone()
                    return

        state = scope.get("state")
        hooked = isinstance(state, dict) and state.get(DISCONNECT_HOOK, False) is None  # offered, client still here
        if hooked:
            state[DISCONNECT_HOOK] = gone  # the protocol calls it (and drops it) if the client goes first
        watcher = None if hooked else asyncio.create_task(watch())
        self.arm_timer(limit)
        try:
            try:
                self._sending = True
                await send({"type": "http.response.start", "status": 200, "headers": self.headers})
                send = scope.get("state", {}).get("raw_send", send)
                # (a transport with its own messages, WebSocket, sends them from its task)
                self._direct = self.direct and direct_send_ok(send) and \
                    type(self).entry_message is EventStreamResponse.entry_message
                self._sending = False
                await self._follow(send)
                if not self._ended:
                    self._sending = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            except asyncio.CancelledError:
                if not (self.disconnected or self.cut_slow):
                    raise
                if me is not None:
                    me.uncancel()
                if self.cut_slow and not self.disconnected and not self._ended:  # (an ended body takes no more)
                    await self._cut(send, limit)
            except OSError:
                self.disconnected = True  # the peer went away while we wrote
        finally:
            self.disarm_timer()
            if watcher is None:
                state[DISCONNECT_HOOK] = None  # type: ignore[index]  # (hooked: the state is a dict)
            else:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            if self.disconnected and self.on_disconnect is not None:
                self.on_disconnect()
            if self.on_close is not None:
                self.on_close()


    async def _follow(self, send: Any) -> None:
        """Send the log; never end without a terminal unless the log ended at or before the cursor."""
        self.last = self.after
        retry_until: float | None = None
        pause = 0.05
        while True:
            try:
                if hasattr(self.store, "waiter"):
                    done = await self._follow_memory(send)
                else:
                    done = await self._follow_tail(send)
                if done or await self.store.get(self.response_id) is not None:
                    return  # sent the terminal, or the log had ended at or before the cursor
                code, message = "cancelled", "The response was deleted."
                break
            except StoreUnavailable as exc:
                # A blip (a busy connection pool, a reconnect) must not end a stream: carry on from the last
                # event sent for a few seconds before telling the reader the store is gone.
                now = asyncio.get_running_loop().time()
                retry_until = now + STORE_RETRY_SECONDS if retry_until is None else retry_until
                if now >= retry_until:
                    code, message = "store_unavailable", f"The response store failed while streaming: {exc}"
                    break
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)
        self._sending = True
        await send(self.terminal_message(self.last + 1, code, message))
        self._sending = False

    async def _follow_memory(self, send: Any) -> bool:
        store: Any = self.store
        rid, after = self.response_id, self.last
        loop = asyncio.get_running_loop()
        direct = self._direct and hasattr(store, "listen")
        while True:
            entries: list[Entry] = store.read_entries(rid, after)
            if entries:
                self._sending = True
                if await self._send_entries(send, entries):
                    return True
                self._sending = False
                self._active = loop.time()
                after = self.last
                continue
            if store.is_ended(rid):
                return False  # deleted (or ended with nothing more to send)
            if direct:
                if await self._wait_direct(store, send):
                    return True
                after = self.last
                continue
            fut = store.waiter(rid, after)
            if fut is None:
                continue
            self._waiting = fut
            try:
                await fut
            except BaseException:
                store.drop_waiter(rid, fut)
                raise
            finally:
                self._waiting = None
            if self._keepalive_due:  # the timer woke us, not an append
                store.drop_waiter(rid, fut)
                await self._send_keepalive(send)

    async def _wait_direct(self, store: Any, send: Any) -> bool:
        """Caught up: the store's appends send the new frames themselves (server/http/direct_send.py) until this task is
        needed. True once the terminal went out; False to catch up (or to find the log ended)."""
        rid = self.response_id
        loop = asyncio.get_running_loop()

        def sent(last: int) -> None:
            self.last = last
            self._active = loop.time()

        direct = DirectSend(send=send, dialect=self.dialect, entries_after=functools.partial(store.read_entries, rid),
                            is_ended=functools.partial(store.is_ended, rid), last=self.last, limit=COALESCE_BYTES,
                            after_send=sent)
        if not store.listen(rid, self.last, direct.on_append):
            return False  # something came meanwhile
        self._waiting = direct.wake
        try:
            await direct.wake
        finally:
            self._waiting = None
            store.unlisten(rid, direct.on_append)
        if direct.suspended is not None:  # flow control held a send: finish it here, the timer watching
            coro, yielded, last, terminal = direct.suspended
            self._sending = True
            await finish_suspended(coro, yielded)
            self._sending = False
            sent(last)
            self._ended = terminal
            return terminal
        if direct.ended:
            self._ended = True
            return True
        if direct.oversize is not None:  # a read too big for one send, its frames made already
            entries, bodies = direct.oversize
            self._sending = True
            done = await self._send_bodies(send, entries, bodies)
            self._sending = False
            self._active = loop.time()
            return done
        if self._keepalive_due:  # the timer woke us, not an append
            await self._send_keepalive(send)
        return False

    async def _send_keepalive(self, send: Any) -> None:
        """The keep-alive the timer asked for (it found this reader idle for ``keepalive_seconds``)."""
        self._keepalive_due = False
        keepalive = self.keepalive_message()
        if keepalive is not None:
            self._sending = True
            await send(keepalive)
            self._sending = False
        self._active = asyncio.get_running_loop().time()

    async def _send_entries(self, send: Any, entries: list[Entry]) -> bool:
        """One read's entries, in order; True once the terminal was sent. SSE frames go out together
        (:meth:`_send_frames`); a transport with its own ``entry_message`` (WebSocket) sends one message each."""
        if type(self).entry_message is EventStreamResponse.entry_message:
            return await self._send_frames(send, entries)
        for entry in entries:
            await send(self.entry_message(entry))
            self.last = entry.sequence_number
            if entry.terminal:
                return True
        return False

    async def _send_frames(self, send: Any, entries: list[Entry]) -> bool:
        """The SSE frames of ``entries`` (ready together) in as few ASGI sends as ``COALESCE_BYTES`` allows: the
        same bytes in the same order, fewer HTTP chunks (each send costs the server its own chunk framing, flow
        control check and transport write). True once the terminal was sent."""
        return await self._send_bodies(send, entries, frames(self.dialect, entries))

    async def _send_bodies(self, send: Any, entries: list[Entry], bodies: list[bytes]) -> bool:
        """:meth:`_send_frames` with the frames of ``entries`` made already (``bodies``, one each)."""
        # A log ends with its terminal: only the last entry of a read can be one. The body ends in the same send
        # (one write of the terminal and the end of the chunked body, not two).
        terminal = entries[-1].terminal
        if len(bodies) == 1 or sum(map(len, bodies)) < COALESCE_BYTES:  # the usual read: one send
            await send({"type": "http.response.body", "more_body": not terminal,
                        "body": bodies[0] if len(bodies) == 1 else b"".join(bodies)})
            self.last = entries[-1].sequence_number
            self._ended = terminal
            return terminal
        # Pieces of at least COALESCE_BYTES (or what is left), each ending at a frame's end: where the running total
        # first reaches the piece's start + COALESCE_BYTES, found by bisection (not a Python step a frame).
        ends = list(itertools.accumulate(map(len, bodies)))
        first, start, last = 0, 0, len(bodies) - 1
        while first <= last:
            i = min(bisect.bisect_left(ends, start + COALESCE_BYTES, first), last)
            await send({"type": "http.response.body", "more_body": not (terminal and i == last),
                        "body": bodies[i] if i == first else b"".join(bodies[first:i + 1])})
            self.last = entries[i].sequence_number
            first, start = i + 1, ends[i]
        self._ended = terminal
        return terminal

    async def _follow_tail(self, send: Any) -> bool:
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1024)

        async def pump() -> None:
            try:
                async for entry in self.store.tail(self.response_id, self.last):
                    await queue.put(entry)
            finally:
                await queue.put(_END)

        task = asyncio.create_task(pump())
        try:
            while True:
                if queue.empty():  # caught up: wait, with the keep-alive as the bound (no timer per entry)
                    try:
                        async with asyncio.timeout(self.keepalive):
                            item = await queue.get()
                    except TimeoutError:
                        keepalive = self.keepalive_message()
                        if keepalive is not None:
                            self._sending = True
                            await send(keepalive)
                            self._sending = False
                        continue
                else:
                    item = queue.get_nowait()
                # Everything the pump has queued already goes out together (as _follow_memory does): the same
                # frames, fewer sends.
                ready = [item]
                while item is not _END and not item.terminal and not queue.empty():
                    item = queue.get_nowait()
                    ready.append(item)
                entries = ready[:-1] if item is _END else ready
                if entries:
                    self._sending = True
                    if await self._send_entries(send, entries):
                        return True
                    self._sending = False
                if item is _END:
                    task.result() if task.done() else None  # surface a store failure
                    return False
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
