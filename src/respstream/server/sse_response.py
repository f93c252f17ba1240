"""The ASGI response that sends one response's event log as SSE: a cursor over the store, live.

How this works: it reads every entry after the cursor, sends each as one frame (one ``send`` per event: live tokens
arrive one at a time), and when it has caught up waits for the next appended batch with a keep-alive timeout; a
timeout sends ``: keep-alive``. It ends after the terminal entry. A stream never ends without a terminal: when the
response is deleted before its terminal reached this reader, or the store fails mid-stream, the reader gets an
``error`` of its own (``cancelled`` / ``store_unavailable``, see :func:`writer.reader_terminal_frame`) and the stream
closes. A watcher task
reads ``receive()``: ``http.disconnect`` stops the sender and calls ``on_disconnect`` (the service then cancels a
foreground generation; a background one runs on).

Stores with ``wait_beyond`` (the memory store) are followed directly; others through their ``tail()`` iterator,
pumped into a queue so a keep-alive timeout never tears the iterator down.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from respstream.server.dialects import Dialect
from respstream.server.store.base import LogEntry, Store, StoreUnavailable
from respstream.server.writer import frame, reader_terminal_frame

__all__ = ["SSE_HEADERS", "EventStreamResponse"]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"keep-alive"),
]
_KEEPALIVE = {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
_END = object()
STORE_RETRY_SECONDS = 3.0  # how long a reader retries a failing store before its terminal `store_unavailable`


class EventStreamResponse:
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
    ) -> None:
        self.store = store
        self.response_id = response_id
        self.after = after
        self.dialect = dialect
        self.keepalive = keepalive_seconds
        self.headers = SSE_HEADERS + headers
        self.on_disconnect = on_disconnect
        self.on_close = on_close
        self.last = after  # the last sequence number sent

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        disconnected = False
        me = asyncio.current_task()

        async def watch() -> None:
            nonlocal disconnected
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected = True
                    if me is not None:
                        me.cancel()
                    return

        watcher = asyncio.create_task(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.headers})
            send = scope.get("state", {}).get("raw_send", send)
            await self._follow(send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not disconnected:
                raise
            if me is not None:
                me.uncancel()
        except OSError:
            disconnected = True  # the peer went away while we wrote
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if disconnected and self.on_disconnect is not None:
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
                if hasattr(self.store, "wait_beyond"):
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
        await send({"type": "http.response.body", "more_body": True,
                    "body": reader_terminal_frame(self.dialect, self.last + 1, code, message)})

    async def _follow_memory(self, send: Any) -> bool:
        store: Any = self.store
        rid, dialect, after = self.response_id, self.dialect, self.last
        while True:
            entries: list[LogEntry] = await store.read(rid, after)
            for entry in entries:
                await send({"type": "http.response.body", "body": frame(dialect, entry), "more_body": True})
                self.last = entry.sequence_number
                if entry.terminal:
                    return True
            if entries:
                after = entries[-1].sequence_number
                continue
            if store.is_ended(rid):
                return False  # deleted (or ended with nothing more to send)
            try:
                async with asyncio.timeout(self.keepalive):
                    await store.wait_beyond(rid, after)
            except TimeoutError:
                await send(_KEEPALIVE)

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
                try:
                    async with asyncio.timeout(self.keepalive):
                        item = await queue.get()
                except TimeoutError:
                    await send(_KEEPALIVE)
                    continue
                if item is _END:
                    task.result() if task.done() else None  # surface a store failure
                    return False
                await send({"type": "http.response.body", "body": frame(self.dialect, item), "more_body": True})
                self.last = item.sequence_number
                if item.terminal:
                    return True
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
