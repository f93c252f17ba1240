"""Direct reads (server/upstream/chat/reads.py): a read of plain text handed to the round's sink from the upstream
connection's data callback, without waking the consumer of ``generate_batches``.

Against the SIMULATED Chat Completions server over real loopback HTTP, writes paced so that each is its own read:
the sink really gets the reads, outside any task; what it and the consumer see together is, chunk for chunk and in
order, what a consumer without a sink gets; what is not plain text (the first read, finish, reasoning, tool calls,
logprobs, a bad chunk, an error event) comes through the consumer; a sink that declines or raises; the idle timeout,
the generation deadline and a cancel of the consumer while the reads go direct; a compressed body never goes direct.
Over the gateway (real uvicorn, memory store): the streams are byte for byte the same with the sink on and off, in
every dialect, and the sink really carried the reads. The connection's side: the hook runs only while the reader's
wait is pending (never a second time before the reader ran, never for a cancelled reader), and never for the body's
last bytes or after an error.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from typing import Any

import pytest

from fakes.chat_server import (
    Chunk,
    Done,
    FakeChatCompletionsServer,
    Headers,
    Raw,
    Sleep,
    Stall,
    finish,
    reasoning,
    text,
    tool,
    usage,
)
from faults.helpers import GatewayThread, check, gateway_app
from respstream.server.events.dialects import get_dialect
from respstream.server.responses.round_collector import RoundCollector
from respstream.server.upstream.base import (
    Finish,
    GenerationRequest,
    ReasoningDelta,
    TextDelta,
    TextRun,
    ToolCallDelta,
    UpstreamError,
    singles,
)
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.http.connection import Dechunker, ProtocolError, UpstreamConnection
from server.test_direct_send import _normalized, _stream

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}])


def make(fake: FakeChatCompletionsServer, **options: Any) -> ChatCompletionsUpstream:
    defaults: dict[str, Any] = {"name": "fake", "idle_timeout": 5.0, "retry_backoff": 0.01, "models": ["fake-model"]}
    return ChatCompletionsUpstream(fake.url, **{**defaults, **options})


def paced(steps: list[Any], gap: float = 0.01) -> list[Any]:
    """``steps`` with a pause after each: every write its own read."""
    out: list[Any] = []
    for step in steps:
        out += [step, Sleep(gap)]
    return out


class Sink:
    """A ReadSink that takes plain text (as the round collector does), logs what it took into ``log`` (shared with
    the consumer) and where it ran; ``others``: the batches offered that were not plain text."""

    def __init__(self, log: list[tuple[str, list[Any]]], *, accept: bool = True, raise_at: int = 0) -> None:
        self.log = log
        self.accept = accept
        self.raise_at = raise_at
        self.calls = 0
        self.in_task = 0
        self.others = 0

    def __call__(self, batch: list[Any]) -> bool:
        self.in_task += asyncio.current_task() is not None
        if not all(c.__class__ is TextRun or (c.__class__ is TextDelta and not c.logprobs) for c in batch):
            self.others += 1
            return False
        self.calls += 1
        if self.raise_at and self.calls == self.raise_at:
            raise RuntimeError("the sink broke")
        if self.accept:
            self.log.append(("sink", batch))
        return self.accept


async def consume(upstream: ChatCompletionsUpstream, sink: Sink | None, log: list[tuple[str, list[Any]]]) -> None:
    stream = upstream.generate_batches(REQUEST, sink=sink) if sink is not None else upstream.generate_batches(REQUEST)
    async for batch in stream:
        log.append(("yield", batch))


def flat(log: list[tuple[str, list[Any]]]) -> list[Any]:
    return [chunk for _, batch in log for chunk in singles(batch)]


async def both_ways(fake: FakeChatCompletionsServer, steps: list[Any], **sink_options: Any
                    ) -> tuple[list[tuple[str, list[Any]]], list[tuple[str, list[Any]]], Sink]:
    """The same script read with a sink and without one."""
    upstream = make(fake)
    try:
        fake.script(*steps)
        direct: list[tuple[str, list[Any]]] = []
        sink = Sink(direct, **sink_options)
        await consume(upstream, sink, direct)
        fake.script(*steps)
        plain: list[tuple[str, list[Any]]] = []
        await consume(upstream, None, plain)
    finally:
        await upstream.aclose()
    return direct, plain, sink


_NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
            "thirteen", "fourteen", "fifteen"]
WORDS = [text(("" if i == 0 else " ") + word) for i, word in enumerate(_NUMBERS)]
WORDS_TEXT = "".join(step.obj["choices"][0]["delta"]["content"] for step in WORDS)


async def test_plain_reads_go_to_the_sink_from_the_data_callback(fake: FakeChatCompletionsServer) -> None:
    steps = [*paced([*WORDS, *WORDS]), finish(), usage(3, 30), Done()]
    direct, plain, sink = await both_ways(fake, steps)
    assert flat(direct) == flat(plain)
    assert sink.calls >= 20 and sink.in_task == 0, (sink.calls, sink.in_task)
    kinds = [kind for kind, _ in direct]
    assert kinds[0] == "yield"  # the round's first read reports itself in the consumer's task
    assert isinstance(flat(direct)[-1], Finish) and direct[-1][0] == "yield"
    assert kinds.count("sink") == sink.calls


async def test_a_sink_that_declines_gets_every_read_yielded(fake: FakeChatCompletionsServer) -> None:
    steps = [*paced(WORDS), finish(), Done()]
    direct, plain, sink = await both_ways(fake, steps, accept=False)
    assert flat(direct) == flat(plain)
    assert sink.calls >= 10 and all(kind == "yield" for kind, _ in direct)


async def test_what_is_not_plain_text_comes_through_the_consumer(fake: FakeChatCompletionsServer) -> None:
    logprobs = Chunk({"choices": [{"index": 0, "delta": {"content": " lp"},
                                   "logprobs": {"content": [{"token": " lp", "logprob": -0.1, "bytes": None,
                                                             "top_logprobs": []}]}}]})
    steps = paced([text("Hi"), text(" a"), reasoning("hmm"), text(" b"), logprobs, text(" c"),
                   tool(0, id="call_1", name="f", args="{\"x\""), tool(0, args=": 1}"), text(" d"), text(" e")])
    steps += [finish("tool_calls"), Done()]
    direct, plain, sink = await both_ways(fake, steps)
    assert flat(direct) == flat(plain)
    assert sink.calls >= 3  # (" a", " c" or " d", " e"...: the plain ones between)
    assert sink.others >= 3  # (reasoning, logprobs, the tool call's pieces: offered, declined, yielded)
    for kind, batch in direct:
        if kind == "sink":
            assert all(c.__class__ in (TextRun, TextDelta) and not getattr(c, "logprobs", None) for c in batch)


async def test_a_bad_chunk_and_an_error_event_after_direct_reads(fake: FakeChatCompletionsServer) -> None:
    error_event = Raw(b"event: error\ndata: {\"error\": {\"message\": \"boom\"}}\n\n")
    for n, (tail, says) in enumerate(((Raw(b"data: {not json\n\n"), "upstream_error"), (error_event, "boom")), 1):
        error, sink, log, _ = await failed_direct(fake, make(fake, retries=0), [*paced(WORDS), tail, Sleep(5)])
        assert says in f"{error.code} {error.message}"
        assert error.before_first_token is False
        assert sink.calls >= 8
        assert "".join(c.text for c in flat(log)) == WORDS_TEXT
        assert await asyncio.to_thread(fake.wait_finished, n)  # (the server saw us go: nothing left for the next)


async def test_a_sink_that_raises_ends_the_stream_with_its_error(fake: FakeChatCompletionsServer) -> None:
    upstream = make(fake, retries=2)
    fake.script(*paced(WORDS), finish(), Done())
    log: list[tuple[str, list[Any]]] = []
    sink = Sink(log, raise_at=4)
    try:
        with pytest.raises(RuntimeError, match="the sink broke"):
            await consume(upstream, sink, log)
        assert sink.calls == 4  # not retried, nothing more handed over
        assert await asyncio.to_thread(fake.wait_finished, 1)
        assert fake.client_disconnects == 1  # the connection was dropped mid-body, not reused
        fake.script(text("again"), finish(), Done())
        again: list[tuple[str, list[Any]]] = []
        await consume(upstream, Sink(again), again)
        assert [c.text for c in flat(again) if isinstance(c, TextDelta)] == ["again"]
    finally:
        await upstream.aclose()


async def failed_direct(fake: FakeChatCompletionsServer, upstream: ChatCompletionsUpstream, steps: list[Any]
                        ) -> tuple[UpstreamError, Sink, list[tuple[str, list[Any]]], float]:
    """``steps`` read through a sink until the attempt fails: the error, the sink, what came, the seconds it took."""
    fake.script(*steps)
    log: list[tuple[str, list[Any]]] = []
    sink = Sink(log)
    started = time.monotonic()
    try:
        with pytest.raises(UpstreamError) as info:
            await consume(upstream, sink, log)
    finally:
        await upstream.aclose()
    return info.value, sink, log, time.monotonic() - started


async def test_the_idle_timeout_ends_a_stream_read_directly(fake: FakeChatCompletionsServer) -> None:
    error, sink, _, took = await failed_direct(fake, make(fake, idle_timeout=0.3, retries=0), [*paced(WORDS), Stall()])
    assert error.code == "upstream_timeout" and not error.before_first_token
    assert sink.calls >= 8
    assert await asyncio.to_thread(fake.wait_finished, 1)
    assert took < 30  # (the error's code says the idle timeout ended it; this only catches a hang on a busy machine)


async def test_the_deadline_ends_a_stream_whose_reads_all_go_direct(fake: FakeChatCompletionsServer) -> None:
    upstream = make(fake, deadline=0.5, idle_timeout=5.0, retries=0)
    error, sink, _, took = await failed_direct(fake, upstream, [*paced([text(" x")] * 300), finish(), Done()])
    assert error.code == "upstream_timeout" and "deadline" in error.message
    assert sink.calls >= 5
    assert took < 30  # (the error's message says the deadline ended it, not the 300 paced deltas' end)
    assert await asyncio.to_thread(fake.wait_finished, 1)


async def test_a_cancelled_consumer_gets_nothing_more(fake: FakeChatCompletionsServer) -> None:
    upstream = make(fake)
    fake.script(*paced([text(" x")] * 300, gap=0.01), finish(), Done())
    log: list[tuple[str, list[Any]]] = []
    sink = Sink(log)
    task = asyncio.create_task(consume(upstream, sink, log))
    try:
        while sink.calls < 5:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        calls = sink.calls
        await asyncio.sleep(0.2)  # ~20 more writes would have come
        assert sink.calls == calls
        assert await asyncio.to_thread(fake.wait_finished, 1) and fake.client_disconnects == 1
    finally:
        await upstream.aclose()


async def test_a_compressed_body_never_goes_direct(fake: FakeChatCompletionsServer) -> None:
    body = b"".join(b"data: " + json.dumps(s.obj).encode() + b"\n\n" for s in [*WORDS, finish()]) + b"data: [DONE]\n\n"
    squeezed = gzip.compress(body)
    steps: list[Any] = [Headers({"content-encoding": "gzip"})]
    steps += paced([Raw(squeezed[i:i + 20]) for i in range(0, len(squeezed), 20)])
    direct, plain, sink = await both_ways(fake, steps)
    assert flat(direct) == flat(plain) and sink.calls == 0
    assert "".join(c.text for c in flat(direct) if isinstance(c, TextDelta)).startswith("one two")


# -- the round collector as the sink -----------------------------------------------------------------------------------

class _TextWriter:
    """SIMULATED writer: records the text calls the collector makes."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.dialect = get_dialect("platform")  # (the collector's item relay reads it)

    def text_deltas(self, texts: list[str]) -> None:
        self.calls.append(list(texts))

    def text_delta(self, text: str, logprobs: Any = None) -> None:
        self.calls.append((text, logprobs))


def test_the_collector_takes_plain_text_only_and_never_the_rounds_first_read() -> None:
    writer = _TextWriter()
    firsts: list[type] = []
    collector = RoundCollector(writer, firsts.append)  # type: ignore[arg-type]
    assert collector.take_read([TextDelta("a")]) is False and writer.calls == []  # the first: the task's
    assert collector.take_all([TextDelta("a")]) is False and firsts == [TextDelta]
    assert collector.take_read([TextRun(["b", "c"])]) is True
    assert collector.take_read([TextDelta("d")]) is True
    assert collector.take_read([TextDelta("")]) is True  # (nothing to write)
    assert collector.take_read([TextRun(["e"]), TextDelta("f")]) is True
    for other in ([TextDelta("x", [{"token": "x"}])], [ReasoningDelta("r")], [TextDelta("g"), ReasoningDelta("r")],
                  [ToolCallDelta(0, "c", "f", "{}")], [Finish("stop")]):
        assert collector.take_read(other) is False, other  # declined: the attempt yields it
    assert writer.calls == [("a", None), ["b", "c"], ["d"], ["e", "f"]]
    assert collector.result(False).text == "abcdef"


# -- over the gateway ------------------------------------------------------------------------------------------------

class _CountingTakeRead:
    """Counts the reads the round collector took directly (wrapping the real method)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.taken = 0
        take_read = RoundCollector.take_read
        me = self

        def counting(self: RoundCollector, chunks: list[Any]) -> bool:
            took = take_read(self, chunks)
            me.taken += took
            return took

        monkeypatch.setattr(RoundCollector, "take_read", counting)


@pytest.mark.parametrize("dialect", ["platform", "openresponses", "openai"])
def test_the_gateways_streams_are_the_same_with_direct_reads_on_and_off(
        fake: FakeChatCompletionsServer, monkeypatch: pytest.MonkeyPatch, dialect: str) -> None:
    counting = _CountingTakeRead(monkeypatch)
    steps = [*paced([*WORDS, *WORDS, *WORDS], gap=0.005), finish(), usage(5, 45), Done()]
    upstream = make(fake)
    app = gateway_app([upstream], dialect=dialect)
    with GatewayThread(app) as gw:
        fake.script(*steps)
        direct = _stream(gw.url, {"model": "fake-model", "input": "hi", "stream": True})
        used = counting.taken
        monkeypatch.setattr(ChatCompletionsUpstream, "takes_read_sink", False)
        fake.script(*steps)
        own = _stream(gw.url, {"model": "fake-model", "input": "hi", "stream": True})
    assert used >= 25, f"{used} of 45 paced reads went direct"
    assert counting.taken == used  # none with the sink off
    assert _normalized(direct) == _normalized(own)
    core = check(direct, dialect=dialect)
    assert core.violations == [] and core.result.status == "completed"
    assert core.result.streamed_text == WORDS_TEXT * 3


# -- the connection's side -------------------------------------------------------------------------------------------

def _waiting_conn(hook_answers: list[bool], seen: list[bytes]) -> UpstreamConnection:
    """A connection in a close-delimited body whose reader waits in read_direct with a hook answering in turn."""
    conn = UpstreamConnection(("http", "x", 1), max_buffer=1 << 20)
    conn._in_body = True
    conn.waiter = asyncio.get_running_loop().create_future()

    def hook(data: bytes) -> bool:
        seen.append(data)
        return hook_answers.pop(0)

    conn.direct = hook
    return conn


async def test_the_hook_runs_only_while_the_readers_wait_is_pending() -> None:
    seen: list[bytes] = []
    conn = _waiting_conn([True, True, False, True], seen)
    conn.data_received(b"a")
    conn.data_received(b"b")
    assert seen == [b"a", b"b"] and not conn.waiter.done() and not conn.pieces  # taken: the reader sleeps on
    conn.data_received(b"c")  # kept for the reader: it is woken
    assert seen == [b"a", b"b", b"c"] and conn.waiter.done() and conn.handed
    conn.data_received(b"d")  # before the reader ran: not the hook's (it would overwrite what it kept)
    assert seen == [b"a", b"b", b"c"] and list(conn.pieces) == [b"d"]

    cancelled = _waiting_conn([True], seen := [])
    cancelled.waiter.cancel()  # (the reader's task was cancelled and has not run yet)
    cancelled.data_received(b"late")
    assert seen == [] and list(cancelled.pieces) == [b"late"]


async def test_the_bodys_end_and_errors_are_the_readers() -> None:
    seen: list[bytes] = []
    conn = _waiting_conn([True], seen)
    conn._length = 3
    conn.data_received(b"abc")  # the last bytes of the body: the reader sees them and the end
    assert seen == [] and conn.waiter.done() and conn.eof and list(conn.pieces) == [b"abc"]
    broken = _waiting_conn([True], seen)
    broken.error = ProtocolError("gone")
    broken.data_received(b"x")
    assert seen == [] and broken.waiter.done()


async def test_a_read_of_chunk_framing_alone_wakes_nobody() -> None:
    seen: list[bytes] = []
    conn = _waiting_conn([True, True], seen)
    conn._chunked = True
    conn._dechunker = Dechunker(conn)
    conn.data_received(b"5\r\n")  # a chunk's size line, its data not here yet
    assert seen == [] and not conn.waiter.done() and not conn.pieces
    conn.data_received(b"hello\r\n")
    assert seen == [b"hello"] and not conn.waiter.done()
