"""Batched rounds and group commit change how often the store and the readers are touched, never what they get.

Each transcript (a SIMULATED upstream's chunks, cut into random batches) runs through the real Pipeline, writer and
store (memory, and real SQLite where the writer group-commits) twice: once chunk by chunk (``generate`` only) and
once a batch at a time (``generate_batches``). The log's SSE frames must be the same bytes. Ids and the completion
time are made deterministic so the two runs can be compared byte for byte. And nothing waits for a batch to fill:
an upstream that holds its second batch until the first one is readable in the store would deadlock otherwise.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from respstream.protocol.stream import StreamCore
from respstream.server.events.dialects import Dialect, get_dialect
from respstream.server.events.frames import frame
from respstream.server.events.response_object import new_response
from respstream.server.events.writer import ResponseWriter
from respstream.server.inputs.requests import parse_request
from respstream.server.responses.pipeline import Pipeline
from respstream.server.store.base import LogEntry, ResponseRecord, SequenceGap, Store, StoreUnavailable
from respstream.server.store.memory import MemoryStore
from respstream.server.store.sqlite import SQLiteStore
from respstream.server.upstream.base import (
    Chunk,
    Finish,
    GenerationRequest,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    TextRun,
    UpstreamError,
    Usage,
    singles,
)

from .helpers import FakeDecision, FakeRewriter, FakeRouter, FakeTools


class _SimulatedChunks:
    """SIMULATED upstream: the transcript chunk by chunk (no ``generate_batches``: the chunk-by-chunk path)."""

    name = "sim"
    models = ["sim-model"]

    def __init__(self, batches: list[list[Chunk]], fail_after: bool = False) -> None:
        self.batches = batches
        self.fail_after = fail_after  # raise an upstream error after the last batch instead of finishing

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        for batch in self.batches:
            for chunk in singles(batch):  # (a run of text as its deltas one by one, as `generate` says them)
                yield chunk
            await asyncio.sleep(0)  # a read boundary: the event loop runs (memory-store flushes, writes)
        if self.fail_after:
            raise UpstreamError("upstream_error", "sim: connection failed mid-stream")


class _SimulatedBatches(_SimulatedChunks):
    """SIMULATED upstream: the same transcript a batch at a time (the batched path)."""

    async def generate_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        for batch in self.batches:
            yield list(batch)
            await asyncio.sleep(0)
        if self.fail_after:
            raise UpstreamError("upstream_error", "sim: connection failed mid-stream")


def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count()
    monkeypatch.setattr(Dialect, "new_id", lambda self, prefix: f"{prefix}_{next(counter):06d}")
    monkeypatch.setattr("respstream.server.events.writer.time", SimpleNamespace(time=lambda: 1700000000.0))


async def _run(upstream: Any, store: Store, dialect_name: str) -> list[bytes]:
    dialect = get_dialect(dialect_name)
    record = ResponseRecord(id="resp_sim", status="in_progress", created_at=1.0, dialect=dialect_name)
    await store.create(record)
    request = parse_request({"model": "sim-model", "input": "hi", "stream": True}, server_tool_names=set(),
                            dialect=dialect_name)
    response = new_response(record.id, request, created=1.0, model="sim-model", dialect=dialect)
    writer = ResponseWriter(record, dialect=dialect, store=store, response=response)
    writer.start()
    decision = FakeDecision("sim-model", "pinned", "router", "pinned", upstream)
    pipeline = Pipeline(writer=writer, request=request, decision=decision, pinned=True,
                        messages=[{"role": "user", "content": "hi"}], router=FakeRouter({"sim-model": upstream}),
                        tools=FakeTools(), rewriter=FakeRewriter())
    await pipeline.run()
    entries = await store.read(record.id)
    return [frame(dialect, e) for e in entries]


_piece = st.text(alphabet=st.sampled_from("ab <>\"\\\né☃"), max_size=6)
_chunk = st.one_of(
    _piece.map(TextDelta),
    _piece.map(TextDelta),
    st.lists(_piece.filter(bool), min_size=1, max_size=5).map(TextRun),  # what one read's template gives
    _piece.map(ReasoningDelta),
    _piece.map(RefusalDelta),
)
_transcript = st.tuples(
    st.lists(_chunk, max_size=40),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40),  # batch sizes, cycled
    st.sampled_from(["stop", "length"]),
    st.booleans(),  # end with an upstream error instead of a Finish
    st.sampled_from(["platform", "openai", "openresponses"]),
)


def _cut(chunks: list[Chunk], sizes: list[int]) -> list[list[Chunk]]:
    out: list[list[Chunk]] = []
    pos = 0
    for size in itertools.cycle(sizes):
        if pos >= len(chunks):
            break
        out.append(chunks[pos : pos + size])
        pos += size
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_transcript)
def test_batched_and_chunk_by_chunk_rounds_log_the_same_bytes(
    case: tuple[list[Chunk], list[int], str, bool, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks, sizes, reason, fails, dialect = case
    tail: list[Chunk] = [] if fails else [Finish(reason, Usage(input_tokens=3, output_tokens=len(chunks)))]
    batches = _cut(chunks + tail, sizes) or [[]]

    async def all_ways() -> list[list[bytes]]:
        results = []
        for kind, store_kind in itertools.product((_SimulatedChunks, _SimulatedBatches), ("memory", "sqlite")):
            _deterministic(monkeypatch)
            store: Any
            if store_kind == "memory":
                store = MemoryStore()
            else:
                store = SQLiteStore(str(tmp_path / f"{kind.__name__}-{next(_files)}.db"))
            try:
                results.append(await _run(kind(batches, fail_after=fails), store, dialect))
            finally:
                if store_kind == "sqlite":
                    await store.aclose()
        return results

    results = asyncio.run(all_ways())
    assert all(r == results[0] for r in results[1:])
    core = StreamCore(dialect=dialect)  # and the stream itself is a valid one: one terminal, gap-free
    core.feed(b"".join(results[0]))
    core.close()
    core.events()
    assert core.violations == []
    expected = ("error", "failed") if fails else (("incomplete",) if reason == "length" else ("completed",))
    assert core.result.status in expected  # the platform dialect ends a failure with `error`, the others `failed`


_files = itertools.count()


class _GatedBatches(_SimulatedChunks):
    """SIMULATED upstream that holds its second batch until the test has seen the first one in the store."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__([])
        self.gate = gate

    async def generate_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        yield [TextDelta("first")]
        await self.gate.wait()
        yield [TextDelta(" second"), Finish("stop")]


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_the_first_delta_is_stored_before_the_upstream_sends_more(store_kind: str, tmp_path: Path) -> None:
    gate = asyncio.Event()
    store: Any = MemoryStore() if store_kind == "memory" else SQLiteStore(str(tmp_path / "gate.db"))
    try:
        run = asyncio.create_task(_run(_GatedBatches(gate), store, "openai"))

        async def first_delta_stored() -> None:
            while True:
                entries = await store.read("resp_sim") if await store.get("resp_sim") is not None else []
                if any(e.type == "response.output_text.delta" for e in entries):
                    return
                await asyncio.sleep(0.005)

        await asyncio.wait_for(first_delta_stored(), timeout=5)  # would time out if the writer waited for more
        gate.set()
        frames = await asyncio.wait_for(run, timeout=5)
        assert b'"delta":" second"' in b"".join(frames)
    finally:
        if store_kind == "sqlite":
            await store.aclose()


class _CountingSQLite(SQLiteStore):
    """Real SQLite; counts appends and can fail one with ``StoreUnavailable`` (a SIMULATED outage)."""

    appends = 0
    fail_append: int | None = None

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        self.appends += 1
        if self.appends == self.fail_append:
            raise StoreUnavailable("simulated outage")
        await super().append(response_id, entries)


async def _group_writer(store: SQLiteStore) -> ResponseWriter:
    record = ResponseRecord(id="resp_g", status="in_progress", created_at=1.0, dialect="openai")
    await store.create(record)
    writer = ResponseWriter(record, dialect=get_dialect("openai"), store=store,
                            response={"id": "resp_g", "object": "response", "status": "in_progress", "output": []})
    writer.start()
    return writer


async def test_group_commit_never_suspends_behind_a_write_and_batches_what_came(tmp_path: Path) -> None:
    store = _CountingSQLite(str(tmp_path / "g.db"))
    try:
        writer = await _group_writer(store)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        tick_task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        await writer.flush_behind()  # starts the first write at once
        for i in range(200):
            writer.text_delta(f"t{i} ")
            await writer.flush_behind()  # a write is in flight: queued, no suspension
        assert ticks == before  # nothing above waited
        await writer.flush()
        tick_task.cancel()
        writer.complete()
        await writer.flush()
        entries = await store.read("resp_g")
        assert [e.sequence_number for e in entries] == list(range(len(entries)))
        assert sum(e.type == "response.output_text.delta" for e in entries) == 200
        assert store.appends <= 4  # the first write, then everything that came meanwhile, then the terminal
    finally:
        await store.aclose()


async def test_group_commit_backpressure_waits_for_the_write_in_flight(tmp_path: Path) -> None:
    store = _CountingSQLite(str(tmp_path / "b.db"))
    try:
        writer = await _group_writer(store)
        writer.group_commit_max = 10
        await writer.flush_behind()
        for i in range(35):
            writer.text_delta(f"{i}")
            await writer.flush_behind()
            assert len(writer._pending) <= 10  # never more queued behind a write than the limit
        await writer.flush()
        entries = await store.read("resp_g")
        assert [e.sequence_number for e in entries] == list(range(len(entries)))
        assert store.appends >= 4
    finally:
        await store.aclose()


async def test_group_commit_retries_a_write_the_store_refused(tmp_path: Path) -> None:
    store = _CountingSQLite(str(tmp_path / "u.db"))
    store.fail_append = 2  # the second write fails once
    try:
        writer = await _group_writer(store)
        writer.retry_unavailable_seconds = 2.0
        for i in range(50):
            writer.text_delta(f"{i},")
            await writer.flush_behind()
            if i % 10 == 0:
                await asyncio.sleep(0.01)  # let writes finish, so there are several
        await writer.flush()
        writer.complete()
        await writer.flush()
        entries = await store.read("resp_g")
        assert [e.sequence_number for e in entries] == list(range(len(entries)))  # gap-free, no duplicate
        deltas = [json.loads(e.data)["delta"] for e in entries if e.type == "response.output_text.delta"]
        assert "".join(deltas) == "".join(f"{i}," for i in range(50))  # every event once, in order
        assert store.appends >= 3  # the refused write happened, and was retried
    finally:
        await store.aclose()


class _LosingSQLite(SQLiteStore):
    """Real SQLite whose second append is refused with ``SequenceGap`` (a SIMULATED store that lost events)."""

    appends = 0

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        self.appends += 1
        if self.appends == 2:
            raise SequenceGap("simulated: the log lost events", entries[0].sequence_number - 1)
        await super().append(response_id, entries)


async def test_a_store_that_lost_events_is_passed_up_not_turned_into_an_internal_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The service ends such a log right after what it holds (store_unavailable); the pipeline must not first try
    an internal_error terminal of its own (refused the same way) nor log a crash."""
    store = _LosingSQLite(str(tmp_path / "gap.db"))
    try:
        upstream = _SimulatedChunks([[TextDelta("a")], [TextDelta("b")], [Finish("stop")]])
        with pytest.raises(SequenceGap):
            await _run(upstream, store, "openai")
        assert store.appends == 2  # no third try with a terminal
        entries = await store.read("resp_sim")
        assert entries and not any(e.terminal for e in entries)
        assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    finally:
        await store.aclose()


class _HeldSQLite(SQLiteStore):
    """Real SQLite whose second append waits for ``release`` before it reaches the store, as a Redis append on a
    busy connection pool can (a SIMULATED slow write); it records the order in which appends reach the store."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.release = asyncio.Event()
        self.calls = 0
        self.landed: list[int] = []  # first sequence number of each append, in the order they reached the store

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        self.calls += 1
        if self.calls == 2:
            await self.release.wait()
        self.landed.append(entries[0].sequence_number)
        await super().append(response_id, entries)


async def test_a_cancel_while_a_write_is_in_flight_keeps_the_next_write_behind_it(tmp_path: Path) -> None:
    """A cancel arriving while a round's closing flush waits for the write in flight (a cancel racing the end of a
    response) must leave that write tracked: the cancel terminal's write waits for it, so the two land in order.
    Before, the terminal overtook it (a gap: SequenceGap, or on Redis a `store_unavailable` terminal)."""
    store = _HeldSQLite(str(tmp_path / "c.db"))
    try:
        writer = await _group_writer(store)
        await writer.flush()  # append 1: response.created
        writer.text_delta("a")
        await writer.flush_behind()  # append 2 starts and is held
        closing = asyncio.create_task(writer.flush())  # the round's end waits for the write in flight
        await asyncio.sleep(0.01)
        closing.cancel()  # the cancel racing the end
        with pytest.raises(asyncio.CancelledError):
            await closing
        writer.fail("cancelled", "The response was cancelled.")
        terminal = asyncio.create_task(writer.flush())
        await asyncio.sleep(0.01)
        assert store.calls == 2, "the terminal's write started while the earlier one was still in flight"
        store.release.set()
        await asyncio.wait_for(terminal, timeout=5)
        entries = await store.read("resp_g")
        assert [e.sequence_number for e in entries] == list(range(len(entries)))
        assert entries[-1].terminal and json.loads(entries[-1].data)["response"]["status"] == "cancelled"
        assert store.landed == sorted(store.landed)
    finally:
        await store.aclose()
