"""The gateway's fast paths say the same as the slow ones: compact delta entries read and frame as the generic
encoder's bytes, the checker's text-delta shortcut leaves it (and its assembler) exactly where ``check`` would, the
per-stream timer sends keep-alives without piling up waiters, and a reader stuck in ``send`` is cut and aborted."""

from __future__ import annotations

import asyncio
import gc
import itertools
from typing import Any

import msgspec
import pytest

from respstream.protocol import events as ev
from respstream.protocol.assembler import Assembler
from respstream.protocol.rules import RuleChecker
from respstream.protocol.stream import StreamCore
from respstream.server.events.dialects import get_dialect
from respstream.server.events.writer import ResponseWriter, frame
from respstream.server.http import sse_response, stream_timer
from respstream.server.http.sse_response import EventStreamResponse
from respstream.server.store.base import DeltaEntry, LogEntry, ResponseRecord
from respstream.server.store.memory import MemoryStore

DELTAS = ["Hello", ", \"quoted\"", " 100% ", " ünïcödé ✓", "\n\ttabs\\", "", " </script>", " end."]


async def _written(dialect_name: str, store: Any) -> tuple[ResponseRecord, str]:
    dialect = get_dialect(dialect_name)
    record = ResponseRecord(id="resp_1", status="in_progress", created_at=0.0, dialect=dialect_name)
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
    await store.create(record)
    writer = ResponseWriter(record, dialect=dialect, store=store, response=response)
    writer.start()
    writer.routing(model_id="m", category="fast", source="router", reasoning="test")
    for delta in DELTAS:
        writer.text_delta(delta)
    writer.reasoning_delta("thinking 50%")  # a second part kind (generic checker path, still a template)
    writer.text_delta("after reasoning")
    writer.complete()
    await writer.flush()
    return record, "".join(DELTAS) + "after reasoning"


@pytest.mark.parametrize("dialect", ["platform", "openai"])
async def test_compact_delta_entries_are_the_generic_encoders_bytes(dialect: str) -> None:
    store = MemoryStore()
    record, text = await _written(dialect, store)
    stored = store.read_entries(record.id)
    compact = [e for e in stored if isinstance(e, DeltaEntry)]
    assert len(compact) == len(DELTAS) + 2  # every delta went in compact
    d = get_dialect(dialect)
    for entry in compact:
        plain = entry.entry()
        # One-step data and frame == what msgspec makes of the decoded event, and frame() of a plain entry.
        assert plain.data == msgspec.json.encode(msgspec.json.decode(plain.data))
        assert frame(d, entry) == frame(d, plain)
    # Every other reader gets real LogEntry objects, equal to the compact ones' expansion.
    read = await store.read(record.id)
    assert all(type(e) is LogEntry for e in read)
    assert [e.data for e in read] == [e.data for e in stored]
    core = StreamCore(dialect=dialect)
    core.feed(b"".join(frame(d, e) for e in stored))
    core.close()
    core.events()
    assert core.violations == []
    assert core.result.status == "completed" and core.result.output_text == text


class _PlainStore:
    """SIMULATED store without ``append_nowait``: the writer must hand it plain LogEntry objects."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.appended: list[Any] = []

    async def create(self, record: ResponseRecord) -> None:
        await self.inner.create(record)

    async def update(self, record: ResponseRecord) -> None:
        await self.inner.update(record)

    async def append(self, response_id: str, entries: list[Any]) -> None:
        self.appended.extend(entries)
        await self.inner.append(response_id, entries)


async def test_stores_without_the_fast_append_get_plain_entries() -> None:
    store = _PlainStore()
    await _written("platform", store)
    assert store.appended and all(type(e) is LogEntry for e in store.appended)
    deltas = [e for e in store.appended if e.type == "response.output_text.delta"]
    assert [msgspec.json.decode(e.data)["delta"] for e in deltas] == [*DELTAS, "after reasoning"]


def _delta(seq: int, oi: int | None, ci: int | None, text: str | None, item: str | None = "m1") -> ev.OutputTextDelta:
    return ev.OutputTextDelta(sequence_number=seq, item_id=item, output_index=oi, content_index=ci, delta=text,
                              logprobs=[])


def _scenarios() -> dict[str, list[ev.Event]]:
    created = ev.ResponseCreated(sequence_number=0, response={"id": "r", "status": "in_progress", "output": []})
    added = ev.OutputItemAdded(sequence_number=1, output_index=0,
                               item={"id": "m1", "type": "message", "role": "assistant", "content": []})
    part = ev.ContentPartAdded(sequence_number=2, item_id="m1", output_index=0, content_index=0,
                               part={"type": "output_text", "text": ""})
    part1 = ev.ContentPartAdded(sequence_number=5, item_id="m1", output_index=0, content_index=1,
                                part={"type": "output_text", "text": ""})
    done = ev.OutputTextDone(sequence_number=6, item_id="m1", output_index=0, content_index=0, text="abX")
    completed = ev.ResponseCompleted(sequence_number=7, response={"id": "r", "status": "completed", "output": []})
    return {
        "clean": [created, added, part, _delta(3, 0, 0, "a"), _delta(4, 0, 0, "b"), done],
        "two parts interleaved": [created, added, part, _delta(3, 0, 0, "a"), _delta(4, 0, 0, "b"), part1,
                                  _delta(6, 0, 1, "c"), _delta(7, 0, 0, "d"), _delta(8, 0, 0, "e")],
        "delta after done": [created, added, part, _delta(3, 0, 0, "a"), _delta(4, 0, 0, "b"), done,
                             _delta(7, 0, 0, "late"), _delta(8, 0, 0, "later")],
        "delta after terminal": [created, added, part, _delta(3, 0, 0, "a"), completed, _delta(8, 0, 0, "x"),
                                 _delta(9, 0, 0, "y")],
        "other item id": [created, added, part, _delta(3, 0, 0, "a"), _delta(4, 0, 0, "b", item="zz"),
                          _delta(5, 0, 0, "c", item="zz")],
        "before added": [created, _delta(1, 0, 0, "a"), _delta(2, 0, 0, "b"), _delta(3, 0, 0, "c")],
    }


@pytest.mark.parametrize("name", list(_scenarios()))
def test_check_text_delta_leaves_the_checker_where_check_would(name: str) -> None:
    slow, fast = RuleChecker(dialect="platform"), RuleChecker(dialect="platform")
    shortcuts = 0
    for event in _scenarios()[name]:
        expected = slow.check(event)
        if isinstance(event, ev.OutputTextDelta) and event.delta is not None and fast.check_text_delta(
                event.sequence_number or 0, event.item_id, event.output_index or 0, event.content_index or 0,
                event.delta):
            shortcuts += 1
            assert expected == ()  # the shortcut is only taken where check finds nothing
        else:
            assert fast.check(event) == expected
    assert fast.violations == slow.violations
    assert fast.assembler.result() == slow.assembler.result()
    assert fast.assembler.events == slow.assembler.events
    if name in ("clean", "two parts interleaved"):
        assert shortcuts >= 1  # the hot path is really taken on a regular stream


def test_assembler_dispatch_table_is_built_once_per_class() -> None:
    first, second = Assembler(), Assembler()
    assert first._dispatch is second._dispatch
    second.feed(_delta(0, 0, 0, "x"))
    assert second.streamed == ["x"] and first.streamed == []


def test_log_entry_is_an_immutable_untracked_struct() -> None:
    entry = LogEntry(3, "response.output_text.delta", b"{}")
    assert entry == LogEntry(3, "response.output_text.delta", b"{}", False)
    assert not entry.terminal and not gc.is_tracked(entry)
    with pytest.raises(AttributeError):
        entry.sequence_number = 4  # type: ignore[misc]


def _created(seq: int) -> LogEntry:
    data = msgspec.json.encode({"type": "response.created", "sequence_number": seq,
                                "response": {"id": "r1", "object": "response", "status": "in_progress",
                                             "output": []}})
    return LogEntry(seq, "response.created", data)


def _completed(seq: int) -> LogEntry:
    data = msgspec.json.encode({"type": "response.completed", "sequence_number": seq,
                                "response": {"id": "r1", "object": "response", "status": "completed",
                                             "output": []}})
    return LogEntry(seq, "response.completed", data, terminal=True)


async def test_keepalives_come_from_the_stream_timer_and_waiters_do_not_pile_up() -> None:
    store = MemoryStore()
    await store.create(ResponseRecord(id="r1", status="in_progress", created_at=0.0))
    await store.append("r1", [_created(0)])
    response = EventStreamResponse(store=store, response_id="r1", after=-1, dialect=get_dialect("platform"),
                                   keepalive_seconds=0.05, headers=[], slow_reader_timeout=5.0)
    sent: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    times: list[float] = []
    three = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body", b"").startswith(b": keep-alive"):
            times.append(loop.time())
            assert len(store._logs["r1"].waiters) <= 1  # each tick's waiter was dropped
            if len(times) == 3:
                three.set()

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    started = loop.time()
    task = asyncio.create_task(response({"type": "http", "state": {}}, receive, send))
    await asyncio.wait_for(three.wait(), 5)
    await store.append("r1", [_completed(1)])
    await asyncio.wait_for(task, 5)
    assert times[0] - started >= 0.05  # not before the interval
    assert all(b - a >= 0.05 for a, b in itertools.pairwise(times))
    bodies = [m.get("body", b"") for m in sent[1:]]
    assert bodies[0].startswith(b"id: 0\n") and bodies[-1].startswith(b"id: 1\n")
    assert sent[-1]["more_body"] is False  # the body ends with the terminal's own send
    assert store._logs["r1"].waiters == []


class _StuckCycle:
    """SIMULATED server connection: the first ``ok`` sends go through, every later one blocks forever (a client
    that stopped reading); ``send`` is a bound method with a ``transport``, as uvicorn's is."""

    def __init__(self, ok: int) -> None:
        self.ok = ok
        self.sent: list[dict[str, Any]] = []
        self.transport = self
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True

    async def send(self, message: dict[str, Any]) -> None:
        if len(self.sent) >= self.ok:
            await asyncio.Event().wait()
        self.sent.append(message)


async def test_a_reader_stuck_in_send_is_cut_and_aborted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_timer, "SLOW_READER_GRACE_SECONDS", 0.05)
    store = MemoryStore()
    await store.create(ResponseRecord(id="r1", status="in_progress", created_at=0.0))
    # (only their frames matter here) Event 0 first on its own: frames ready together go out in one send, so the
    # later two are appended once event 0 went out and form the batch that never does.
    await store.append("r1", [_created(0)])
    stopped: list[str] = []
    response = EventStreamResponse(store=store, response_id="r1", after=-1, dialect=get_dialect("platform"),
                                   keepalive_seconds=10, headers=[], slow_reader_timeout=0.1,
                                   on_disconnect=lambda: stopped.append("disconnect"),
                                   on_slow_reader=lambda: stopped.append("slow"))
    cycle = _StuckCycle(ok=2)  # the start message and event 0; event 1 never goes out

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def later() -> None:
        while len(cycle.sent) < 2:
            await asyncio.sleep(0.005)
        await store.append("r1", [_created(1), _created(2)])

    loop = asyncio.get_running_loop()
    started = loop.time()
    appender = asyncio.create_task(later())
    await asyncio.wait_for(response({"type": "http", "state": {}}, receive, cycle.send), 5)
    await appender
    assert loop.time() - started >= 0.1  # never before the limit
    assert response.cut_slow and response.last == 0
    assert stopped == ["slow"]  # the generation is stopped once, as a slow reader, not as a disconnect
    assert cycle.aborted  # it would not even take its terminal: the connection is dropped


async def _served(response: EventStreamResponse) -> list[dict[str, Any]]:
    """The ASGI messages ``response`` sends to a client that never disconnects."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    await asyncio.wait_for(response({"type": "http", "state": {}}, receive, send), 5)
    return sent


@pytest.mark.parametrize(("events", "sends"), [(5, 1), (400, None)])
async def test_frames_ready_together_go_out_in_few_sends_with_the_same_bytes(events: int, sends: int | None) -> None:
    dialect = get_dialect("platform")
    store = MemoryStore()
    await store.create(ResponseRecord(id="r1", status="in_progress", created_at=0.0))
    log = [_created(i) for i in range(events - 1)] + [_completed(events - 1)]
    await store.append("r1", log)
    sent = await _served(EventStreamResponse(store=store, response_id="r1", after=-1, dialect=dialect,
                                             keepalive_seconds=10, headers=[], slow_reader_timeout=5.0))
    bodies = [m["body"] for m in sent[1:]]
    assert b"".join(bodies) == b"".join(frame(dialect, e) for e in log)  # the same bytes, in order
    biggest = max(len(frame(dialect, e)) for e in log)
    if sends is not None:
        assert len(bodies) == sends
    else:  # a long batch: bounded chunks, each at most the limit plus the frame that crossed it
        assert 1 < len(bodies) < events
        assert all(len(b) < sse_response.COALESCE_BYTES + biggest for b in bodies)
        # ... and each but the last one reached the limit: as few sends as the limit allows.
        assert all(len(b) >= sse_response.COALESCE_BYTES for b in bodies[:-1])
    # The body ends with the terminal's own send: no empty send after it.
    assert [m["more_body"] for m in sent[1:]] == [True] * (len(sent) - 2) + [False]


@pytest.mark.parametrize("events", [3, 400])
async def test_a_tailed_store_sends_what_is_queued_together_with_the_same_bytes(events: int, tmp_path: Any) -> None:
    """The tail path (stores without ``waiter``: real SQLite here) coalesces like the memory path."""
    from respstream.server.store.sqlite import SQLiteStore

    dialect = get_dialect("platform")
    store = SQLiteStore(str(tmp_path / "tail.db"))
    try:
        await store.create(ResponseRecord(id="r1", status="in_progress", created_at=0.0))
        log = [_created(i) for i in range(events - 1)] + [_completed(events - 1)]
        await store.append("r1", log)
        sent = await _served(EventStreamResponse(store=store, response_id="r1", after=-1, dialect=dialect,
                                                 keepalive_seconds=10, headers=[], slow_reader_timeout=5.0))
    finally:
        await store.aclose()
    bodies = [m["body"] for m in sent[1:]]
    assert b"".join(bodies) == b"".join(frame(dialect, e) for e in log)  # the same bytes, in order
    assert len(bodies) < events or events <= 3  # fewer sends than events on a long log
    # The body ends with the terminal's own send: no empty send after it.
    assert [m["more_body"] for m in sent[1:]] == [True] * (len(sent) - 2) + [False]


def test_platform_ids_are_random_version_4_uuids() -> None:
    import uuid

    from respstream.server.events.dialects import uuid4_text

    seen = set()
    for _ in range(2000):
        text = uuid4_text()
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.add(text)
    assert len(seen) == 2000
    assert uuid.UUID(get_dialect("platform").new_id("resp")).version == 4


def test_prefixed_ids_are_random_version_4_uuids_in_hex() -> None:
    import re
    import uuid

    seen = set()
    for _ in range(2000):
        text = get_dialect("openai").new_id("msg")
        assert re.fullmatch(r"msg_[0-9a-f]{32}", text)
        parsed = uuid.UUID(hex=text[4:])
        assert parsed.hex == text[4:] and parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.add(text)
    assert len(seen) == 2000
