"""The SSE sender's direct path (server/http/direct_send.py): a caught-up reader's frames sent from the store's append.

Units: :func:`finish_suspended` runs a coroutine that suspended outside a task as a task would (the future's result,
its failure, a cancel of the caller, a bare yield); :class:`DirectSend` sends what an append brought, hands a
suspended send, a big read, the terminal, the end without one and its own errors to the task, and never raises into
the writer. The sends there are SIMULATED coroutines.

Over real uvicorn (loopback, the gateway's real app and memory store; SIMULATED upstreams): streams are byte for byte
what the task's own sends give, in every dialect; the direct path really carries the reads of a paced stream; a client
that stops reading makes a direct send suspend, and the stream still arrives whole and in order.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import pytest
import uvicorn.protocols.http.h11_impl as h11_impl
import uvicorn.protocols.http.httptools_impl as httptools_impl

from faults.helpers import GatewayThread, check, gateway_app
from respstream.server.events.dialects import get_dialect
from respstream.server.events.frames import frames
from respstream.server.http import direct_send, sse_response
from respstream.server.http.direct_send import DirectSend, direct_send_ok, finish_suspended
from respstream.server.store.base import LogEntry
from respstream.server.upstream.scripted import ScriptedUpstream

# -- finish_suspended ------------------------------------------------------------------------------------------------

async def _waits_on(fut: asyncio.Future[int], log: list[Any]) -> str:
    try:
        log.append(await fut)
    except BaseException as exc:
        log.append(type(exc).__name__)
        raise
    await asyncio.sleep(0)  # a bare yield too
    log.append("end")
    return "done"


def _start(coro: Any) -> Any:
    """Drive ``coro`` to its first suspension outside any task, as DirectSend does; what it yielded."""
    return coro.send(None)


async def test_finish_suspended_resumes_with_the_result() -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    log: list[Any] = []
    coro = _waits_on(fut, log)
    yielded = _start(coro)
    assert yielded is fut
    asyncio.get_running_loop().call_later(0.01, fut.set_result, 7)
    await finish_suspended(coro, yielded)
    assert log == [7, "end"]


async def test_finish_suspended_lets_the_coroutine_see_the_futures_failure() -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    log: list[Any] = []
    coro = _waits_on(fut, log)
    yielded = _start(coro)
    asyncio.get_running_loop().call_later(0.01, fut.set_exception, OSError("gone"))
    with pytest.raises(OSError, match="gone"):
        await finish_suspended(coro, yielded)
    assert log == ["OSError"]


async def test_cancelling_the_caller_cancels_the_future_and_the_coroutine() -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    log: list[Any] = []
    coro = _waits_on(fut, log)
    task = asyncio.create_task(finish_suspended(coro, _start(coro)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fut.cancelled()
    assert log == ["CancelledError"]
    assert coro.cr_frame is None  # ended, not left suspended


async def test_a_cancel_after_the_futures_result_is_not_swallowed() -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    log: list[Any] = []
    coro = _waits_on(fut, log)
    task = asyncio.create_task(finish_suspended(coro, _start(coro)))
    await asyncio.sleep(0.01)
    fut.set_result(1)  # the task is now scheduled to resume...
    task.cancel()  # ...and is cancelled before it runs: the cancel is the caller's, not the coroutine's outcome
    with pytest.raises(asyncio.CancelledError):
        await task
    assert coro.cr_frame is None


# -- DirectSend ------------------------------------------------------------------------------------------------------

class FakeLog:
    """A SIMULATED log for DirectSend: entries by sequence number, and an ended flag."""

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.ended = False

    def add(self, event_type: str = "response.output_text.delta", *, terminal: bool = False) -> None:
        n = len(self.entries)
        data = b'{"type":"%s","sequence_number":%d}' % (event_type.encode(), n)
        self.entries.append(LogEntry(n, event_type, data, terminal=terminal))

    def after(self, last: int) -> list[LogEntry]:
        return self.entries[last + 1:]


def _direct(log: FakeLog, send: Any, *, limit: int = 1 << 20, last: int = -1) -> tuple[DirectSend, list[int]]:
    sent: list[int] = []
    d = DirectSend(send=send, dialect=get_dialect("platform"), entries_after=log.after, is_ended=lambda: log.ended,
                   last=last, limit=limit, after_send=sent.append)
    return d, sent


async def test_an_append_is_sent_at_once_and_the_task_not_woken() -> None:
    log, messages = FakeLog(), []

    async def send(message: dict[str, Any]) -> None:  # completes without suspending, as uvicorn's does
        messages.append(message)

    d, sent = _direct(log, send)
    log.add(), log.add()
    d.on_append()
    log.add()
    d.on_append()
    assert sent == [1, 2] and d.last == 2
    assert [m["more_body"] for m in messages] == [True, True]
    assert messages[0]["body"].count(b"\n\n") == 2 and b"sequence_number\":2" in messages[1]["body"]
    assert not d.wake.done()
    d.on_append()  # nothing new: nothing sent
    assert len(messages) == 2


async def test_the_terminal_ends_the_body_and_wakes_the_task() -> None:
    log, messages = FakeLog(), []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    d, _ = _direct(log, send)
    log.add(), log.add("response.completed", terminal=True)
    d.on_append()
    assert messages[-1]["more_body"] is False
    assert d.ended and d.wake.done()
    log.add()
    d.on_append()  # woken: later appends are the task's
    assert len(messages) == 1


async def test_a_send_that_suspends_is_handed_to_the_task() -> None:
    log = FakeLog()
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    written: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:  # flow control paused: waits before writing
        await gate
        written.append(message["body"])

    d, sent = _direct(log, send)
    log.add()
    d.on_append()
    assert d.wake.done() and d.suspended is not None and sent == []
    coro, yielded, last, terminal = d.suspended
    assert (last, terminal) == (0, False)
    gate.set_result(None)
    await finish_suspended(coro, yielded)
    assert len(written) == 1 and b"sequence_number\":0" in written[0]


async def test_a_read_past_the_limit_and_the_end_without_terminal_wake_the_task() -> None:
    log = FakeLog()

    async def send(message: dict[str, Any]) -> None:
        raise AssertionError("nothing is sent directly here")

    d, _ = _direct(log, send, limit=10)
    log.add()
    d.on_append()
    assert d.wake.done() and d.suspended is None and not d.ended
    log2 = FakeLog()
    d2, _ = _direct(log2, send)
    log2.ended = True  # deleted: no entries, log ended
    d2.on_append()
    assert d2.wake.done() and not d2.ended


async def test_a_read_past_the_limit_hands_its_frames_to_the_task() -> None:
    """The frames made for a read too big for one send go to the task as they are (not formatted again)."""
    log = FakeLog()

    async def send(message: dict[str, Any]) -> None:
        raise AssertionError("nothing is sent directly here")

    d, _ = _direct(log, send, limit=10)
    log.add(), log.add()
    d.on_append()
    assert d.wake.done() and d.oversize is not None
    entries, bodies = d.oversize
    assert [e.sequence_number for e in entries] == [0, 1]
    assert bodies == frames(get_dialect("platform"), log.entries)


async def test_errors_go_to_the_task_not_the_writer() -> None:
    log = FakeLog()

    async def send(message: dict[str, Any]) -> None:
        raise OSError("peer gone")

    d, _ = _direct(log, send)
    log.add()
    d.on_append()  # does not raise
    with pytest.raises(OSError, match="peer gone"):
        await d.wake


def test_direct_send_is_taken_for_uvicorns_http_send_only() -> None:
    for module in (httptools_impl, h11_impl):
        cycle = object.__new__(module.RequestResponseCycle)
        assert direct_send_ok(cycle.send)

    async def plain(message: Any) -> None: ...

    assert not direct_send_ok(plain)
    assert not direct_send_ok(object())


# -- over real uvicorn -------------------------------------------------------------------------------------------------

def _stream(url: str, body: dict[str, Any]) -> bytes:
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{url}/v1/responses", json=body) as response:
        assert response.status_code == 200
        return b"".join(response.iter_bytes())


def _normalized(raw: bytes) -> bytes:
    """The stream with its per-response ids and times blanked (two runs of one script differ only there)."""
    import re

    raw = re.sub(rb'"(resp|msg|item|rs|fc)_[0-9a-zA-Z_-]+"', b'"ID"', raw)
    raw = re.sub(rb'"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"', b'"ID"', raw)
    raw = re.sub(rb'"(id|item_id|response_id)":"[^"]*"', rb'"\1":"ID"', raw)
    return re.sub(rb'"(created_at|completed_at)":[0-9.]+', rb'"\1":0', raw)


class _Counting:
    """Counts the direct path's sends and its hand-overs of suspended sends (wrapping the real methods)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.direct_sends = 0
        self.suspended = 0
        on_append, finish = DirectSend.on_append, direct_send.finish_suspended
        me = self

        def counting_on_append(self: DirectSend) -> None:
            before = self.last
            on_append(self)
            me.direct_sends += self.last != before

        async def counting_finish(coro: Any, yielded: Any) -> None:
            me.suspended += 1
            await finish(coro, yielded)

        monkeypatch.setattr(DirectSend, "on_append", counting_on_append)
        monkeypatch.setattr(sse_response, "finish_suspended", counting_finish)


@pytest.mark.parametrize("dialect", ["platform", "openresponses", "openai"])
def test_direct_and_task_sends_give_the_same_bytes(monkeypatch: pytest.MonkeyPatch, dialect: str) -> None:
    counting = _Counting(monkeypatch)
    upstream = ScriptedUpstream(120, name="scripted", models=["scripted"], delay_ms=2)
    app = gateway_app([upstream], dialect=dialect)
    with GatewayThread(app) as gw:
        # How often the direct path sends depends on the pace the deltas find the writer idle: on a busy machine
        # deltas bunch up and one send carries several. Retried on load (up to 3 streams), never relaxed.
        for _ in range(3):
            before = counting.direct_sends
            direct = _stream(gw.url, {"input": "hi", "stream": True})
            used = counting.direct_sends - before
            if used >= 20:
                break
        total = counting.direct_sends
        monkeypatch.setattr(sse_response.EventStreamResponse, "direct", False)
        own = _stream(gw.url, {"input": "hi", "stream": True})
    assert used >= 20, f"the direct path sent {used} times for 120 deltas 2 ms apart"
    assert counting.direct_sends == total  # the last stream did not use it
    assert _normalized(direct) == _normalized(own)
    core = check(direct, dialect=dialect)
    assert core.violations == [] and core.result.status == "completed"


def test_a_reader_that_stops_reading_gets_its_stream_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """20 KB deltas 2 ms apart (8 MB) to a client that reads nothing for a second: the loopback buffers take ~3 MB,
    then uvicorn's flow control pauses the connection, a direct send suspends and the task finishes it; the stream
    arrives complete and in order."""
    counting = _Counting(monkeypatch)
    chunk = "y" * 20_000
    upstream = ScriptedUpstream(400, name="scripted", models=["scripted"], delay_ms=2, text=chunk * 400)
    app = gateway_app([upstream])
    with GatewayThread(app) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        body = b'{"input": "a long answer please", "stream": true}'
        sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
        time.sleep(1.0)  # read nothing: the buffers fill and uvicorn pauses writing
        sock.settimeout(30)
        chunks = []
        while data := sock.recv(1 << 16):
            chunks.append(data)
        sock.close()
    from faults.test_slow_reader import _dechunk

    core = check(_dechunk(b"".join(chunks)))
    assert core.violations == []
    assert core.result.status == "completed"
    assert core.result.streamed_text == chunk * 400
    assert counting.suspended >= 1, "no direct send was held by flow control"
    assert counting.direct_sends >= 1


def test_an_idle_direct_reader_gets_keepalives_and_then_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas 400 ms apart with keepalive_seconds 0.1: the caught-up reader waits on the direct path, the timer wakes
    it for keep-alives between the deltas, and the stream is still whole (the deltas sent directly)."""
    counting = _Counting(monkeypatch)
    upstream = ScriptedUpstream(4, name="scripted", models=["scripted"], delay_ms=400)
    app = gateway_app([upstream], keepalive_seconds=0.1)
    with GatewayThread(app) as gw:
        raw = _stream(gw.url, {"input": "hi", "stream": True})
    assert raw.count(b": keep-alive\n\n") >= 4
    assert counting.direct_sends >= 3
    core = check(raw)
    assert core.violations == [] and core.result.status == "completed"
    assert len(core.result.streamed_text.split()) == 4


def test_a_read_past_the_limit_is_framed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas of 40,000 characters: every read is over ``COALESCE_BYTES``, so the direct path hands each to the task.
    Each event is framed once (the task sends the frames the direct path made), and the bytes are those of a stream
    the task sends alone."""
    framed: list[int] = []
    handed: list[int] = []

    def counting_frames(dialect: Any, entries: list[Any]) -> list[bytes]:
        framed.extend(e.sequence_number for e in entries)
        return frames(dialect, entries)

    monkeypatch.setattr(direct_send, "frames", counting_frames)
    monkeypatch.setattr(sse_response, "frames", counting_frames)
    on_append = DirectSend.on_append

    def noting_on_append(self: DirectSend) -> None:
        on_append(self)
        if self.oversize is not None and handed[-1:] != [id(self)]:
            handed.append(id(self))

    monkeypatch.setattr(DirectSend, "on_append", noting_on_append)
    upstream = ScriptedUpstream(12, name="scripted", models=["scripted"], delay_ms=2, text="z" * 40_000 * 12)
    app = gateway_app([upstream])
    with GatewayThread(app) as gw:
        direct = _stream(gw.url, {"input": "hi", "stream": True})
        events = direct.count(b"\ndata: ")
        assert handed, "no read went over the limit"
        assert sorted(framed) == list(range(events)), "an event was framed twice, or not at all"
        monkeypatch.setattr(sse_response.EventStreamResponse, "direct", False)
        own = _stream(gw.url, {"input": "hi", "stream": True})
    assert _normalized(direct) == _normalized(own)
    core = check(direct, dialect="platform")
    assert core.violations == [] and core.result.status == "completed"
