"""A run of text deltas handled in one step says exactly what the deltas one by one say.

``ResponseWriter.text_deltas`` (what ``RoundCollector.take_all`` calls for a run of plain text deltas in a batch),
``RuleChecker.check_text_deltas`` / ``Assembler.feed_text_deltas``, the scripted upstream's ``generate_batches`` and
``frames()`` each have a one-at-a-time twin; these tests hold them to it: the same log bytes on a compact (memory) and
a plain (SQLite) store, the same checker and assembler state, the same chunks, the same frames, and the same failure
when a delta in the run is over ``max_event_bytes``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from respstream.protocol import events as ev
from respstream.protocol.rules import RuleChecker
from respstream.protocol.stream import StreamCore
from respstream.server.events.dialects import Dialect, get_dialect
from respstream.server.events.frames import frame, frames
from respstream.server.events.response_object import new_response
from respstream.server.events.writer import ResponseWriter, WriterClosed
from respstream.server.inputs.requests import parse_request
from respstream.server.store.base import DeltaEntry, LogEntry, ResponseRecord
from respstream.server.store.memory import MemoryStore
from respstream.server.store.sqlite import SQLiteStore
from respstream.server.upstream.base import GenerationRequest, UpstreamError
from respstream.server.upstream.scripted import ScriptedUpstream

_pieces = st.lists(st.text(alphabet=st.sampled_from("ab %\"\\\né☃<"), max_size=5), max_size=12)


async def _log(store: Any, runs: list[list[str]], *, batched: bool, dialect: str = "platform",
               max_event_bytes: int = 16 << 20) -> tuple[list[bytes], str | None]:
    """The frames a writer logs for ``runs`` (text deltas, a reasoning delta between runs), and the error it hit."""
    d = get_dialect(dialect)
    record = ResponseRecord(id="resp_run", status="in_progress", created_at=0.0, dialect=dialect)
    request = parse_request({"model": "m", "input": "hi", "stream": True}, server_tool_names=set(), dialect=dialect)
    response = new_response(record.id, request, created=1.0, model="m", dialect=d)  # a whole Response object
    await store.create(record)
    writer = ResponseWriter(record, dialect=d, store=store, response=response, max_event_bytes=max_event_bytes)
    ids = iter(f"id_{i}" for i in range(100))
    failed = None
    try:
        with patch.object(Dialect, "new_id", lambda self, prefix: next(ids)), patch(  # what the two runs share
                "respstream.server.events.writer.time", SimpleNamespace(time=lambda: 1700000000.0)):
            writer.start()
            for i, run in enumerate(runs):
                if i:
                    writer.reasoning_delta("think")
                if batched:
                    writer.text_deltas(run)
                else:
                    for delta in run:
                        writer.text_delta(delta)
            writer.complete()
    except WriterClosed as exc:
        failed = str(exc)
    await writer.flush()
    entries = await store.read(record.id)
    return [frame(d, e) for e in entries], failed


@settings(max_examples=40, deadline=None)
@given(runs=st.lists(_pieces, max_size=4), dialect=st.sampled_from(["platform", "openai", "openresponses"]))
def test_a_run_logs_what_the_deltas_one_by_one_log(runs: list[list[str]], dialect: str, tmp_path_factory: Any) -> None:
    async def both() -> None:
        for make in (MemoryStore, lambda: SQLiteStore(str(tmp_path_factory.mktemp("db") / "r.db"))):
            one = make()
            other = make()
            try:
                expected = await _log(one, runs, batched=False, dialect=dialect)
                assert await _log(other, runs, batched=True, dialect=dialect) == expected
                core = StreamCore(dialect=dialect)  # and it is a clean stream with every delta's text
                core.feed(b"".join(expected[0]))
                core.close()
                core.events()
                assert core.violations == [] and expected[1] is None
                assert core.result.status == "completed"
                assert core.result.output_text == "".join(delta for run in runs for delta in run)
            finally:
                for store in (one, other):
                    if isinstance(store, SQLiteStore):
                        await store.aclose()

    asyncio.run(both())


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_a_delta_over_the_size_limit_inside_a_run_fails_where_it_would_alone(store_kind: str,
                                                                                   tmp_path: Path) -> None:
    run = ["small", "also small", "x" * 3000, "never sent"]
    results = []
    for batched in (False, True):
        store: Any = MemoryStore() if store_kind == "memory" else SQLiteStore(str(tmp_path / f"{batched}.db"))
        try:
            results.append(await _log(store, [run], batched=batched, max_event_bytes=2000))
        finally:
            if isinstance(store, SQLiteStore):
                await store.aclose()
    assert results[0] == results[1]
    sent, failed = results[0]
    assert failed is not None and "max_event_bytes" in failed
    body = b"".join(sent)
    assert b"also small" in body and b"never sent" not in body and b"event_too_large" in body


def _delta(seq: int, text: str, oi: int = 0, ci: int = 0, item: str = "m1") -> ev.OutputTextDelta:
    return ev.OutputTextDelta(sequence_number=seq, item_id=item, output_index=oi, content_index=ci, delta=text,
                              logprobs=[])


def test_check_text_deltas_leaves_the_checker_where_check_of_each_would() -> None:
    created = ev.ResponseCreated(sequence_number=0, response={"id": "r", "status": "in_progress", "output": []})
    added = ev.OutputItemAdded(sequence_number=1, output_index=0,
                               item={"id": "m1", "type": "message", "role": "assistant", "content": []})
    part = ev.ContentPartAdded(sequence_number=2, item_id="m1", output_index=0, content_index=0,
                               part={"type": "output_text", "text": ""})
    slow, fast = RuleChecker(dialect="platform"), RuleChecker(dialect="platform")
    for event in (created, added, part, _delta(3, "a")):
        assert slow.check(event) == fast.check(event) == ()
    run = ["b", "", "c d", "é"]
    for i, text in enumerate(run):
        assert slow.check(_delta(4 + i, text)) == ()
    assert fast.check_text_deltas(4, "m1", 0, 0, run)
    assert fast.assembler.result() == slow.assembler.result()
    assert fast.assembler.events == slow.assembler.events
    assert fast.assembler.last_sequence_number == slow.assembler.last_sequence_number == 7
    # Not the part the checker last saw clean (another item, another index): nothing done, the caller goes slow.
    events = fast.assembler.events
    assert not fast.check_text_deltas(8, "other", 0, 0, ["x"])
    assert not fast.check_text_deltas(8, "m1", 0, 1, ["x"])
    assert fast.assembler.events == events
    # After the terminal the assembler refuses a run too.
    done = ev.ResponseCompleted(sequence_number=8, response={"id": "r", "status": "completed", "output": []})
    fast.check(done)
    assert not fast.assembler.feed_text_deltas(9, 0, 0, ["late"])


def _chunks(upstream: ScriptedUpstream, request: GenerationRequest, batched: bool) -> tuple[list[Any], list[int],
                                                                                              str | None]:
    async def collect() -> tuple[list[Any], list[int], str | None]:
        out: list[Any] = []
        sizes: list[int] = []
        try:
            if batched:
                async for batch in upstream.generate_batches(request):
                    assert batch  # never an empty list
                    sizes.append(len(batch))
                    out.extend(batch)
            else:
                async for chunk in upstream.generate(request):
                    out.append(chunk)
        except UpstreamError as exc:
            return out, sizes, exc.message
        return out, sizes, None

    return asyncio.run(collect())


@pytest.mark.parametrize("spec", ["scripted:200", "scripted:5?reasoning=3", "scripted:130?fail_at=100",
                                  "scripted:3?fail_at=0", "scripted:4?delay_ms=1&reasoning=2", "scripted:0",
                                  "scripted:3?fail_at=3"])
def test_scripted_batches_are_its_chunks_cut_at_its_pauses(spec: str) -> None:
    request = GenerationRequest(model="scripted", messages=[{"role": "user", "content": "hi"}])
    one = ScriptedUpstream.from_spec(spec)
    other = ScriptedUpstream.from_spec(spec)
    chunks, _, error = _chunks(one, request, batched=False)
    batched, sizes, batch_error = _chunks(other, request, batched=True)
    assert batched == chunks and batch_error == error  # what came before a failure is delivered before it
    if "delay_ms" in spec:
        assert set(sizes[:-1]) == {1}  # one chunk a read when each waits (the Finish may share the last one)
    else:
        assert max(sizes, default=0) <= 64  # cut where generate turns the event loop
    if spec == "scripted:200":
        assert sizes == [63, 64, 64, 10]  # 200 deltas + Finish, a turn of the loop every 64 deltas


class _Recording(ScriptedUpstream):
    """A subclass with its own ``generate`` (as tests that record requests have): batches must come from it."""

    async def generate(self, request: GenerationRequest) -> Any:
        async for chunk in super().generate(request):
            yield chunk if not isinstance(chunk, type(self._text[0])) else type(chunk)(chunk.text.upper())


def test_a_subclass_generate_is_what_its_batches_hold() -> None:
    request = GenerationRequest(model="scripted", messages=[{"role": "user", "content": "hi"}])
    chunks, _, _ = _chunks(_Recording.from_spec("scripted:3"), request, batched=False)
    batched, sizes, _ = _chunks(_Recording.from_spec("scripted:3"), request, batched=True)
    assert batched == chunks and sizes == [1] * len(chunks)
    assert chunks[0].text == "THE"


@pytest.mark.parametrize("dialect", ["platform", "openai", "openresponses"])
def test_frames_are_frame_of_each_entry(dialect: str) -> None:
    from respstream.server.store.base import DeltaTemplate

    d = get_dialect(dialect)
    template = DeltaTemplate("response.output_text.delta", b'{"type":"response.output_text.delta","sequence_number":',
                             b',"item_id":"m","output_index":0,"content_index":0,"delta":', b',"logprobs":[]}')
    entries: list[Any] = [LogEntry(0, "response.created", b'{"type":"response.created","sequence_number":0}'),
                          DeltaEntry(1, b'"a 100%"', template), DeltaEntry(2, b'"b"', template),
                          LogEntry(3, "response.completed", b'{"type":"response.completed","sequence_number":3}',
                                   True)]
    assert frames(d, entries) == [frame(d, e) for e in entries]
    assert frames(d, []) == []
