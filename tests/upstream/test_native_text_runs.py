"""The native translator on reads of many events (issue 33, native CPU per event): runs of text deltas are taken by
``StreamCore.take_text_run`` (decoded together) and leave the core exactly as reading the events one by one does; a
read cut inside an event keeps the lane for the next read; what is decoded stays linear in the input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from respstream.protocol import text_runs
from respstream.protocol.stream import StreamCore
from respstream.server.upstream.base import Finish, TextDelta, singles
from respstream.server.upstream.responses.stream import ResponsesTranslator


def stream(n: int, *, numbered: bool = True, named: bool = True, tweak: dict[int, dict[str, Any]] | None = None,
           words: list[str] | None = None) -> list[bytes]:
    """A Responses stream of ``n`` text deltas, one event per element; ``tweak[i]`` overrides fields of delta i."""
    out: list[bytes] = []

    def emit(event: dict[str, Any]) -> None:
        if numbered:
            event = {"type": event["type"], "sequence_number": len(out), **event}
        data = json.dumps(event, separators=(",", ":"))
        out.append((f"event: {event['type']}\n" if named else "").encode() + f"data: {data}\n\n".encode())

    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
    emit({"type": "response.created", "response": response})
    emit({"type": "response.output_item.added", "output_index": 0, "item": item})
    emit({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
          "part": {"type": "output_text", "text": "", "annotations": []}})
    words = words if words is not None else [f" w{i}" for i in range(n)]
    for i, word in enumerate(words):
        emit({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
              "delta": word, "logprobs": [], **(tweak or {}).get(i, {})})
    text = "".join(words)
    part = {"type": "output_text", "text": text, "annotations": []}
    done = {**item, "status": "completed", "content": [part]}
    emit({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
          "text": text})
    emit({"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
          "part": part})
    emit({"type": "response.output_item.done", "output_index": 0, "item": done})
    emit({"type": "response.completed", "response": {**response, "status": "completed", "output": [done]}})
    return out


def translate(reads: list[bytes]) -> tuple[list[Any], ResponsesTranslator]:
    translator = ResponsesTranslator(name="t")
    chunks = [c for raw in reads for c in singles(translator.feed(raw))] + list(singles(translator.finish()))
    return chunks, translator


def state(translator: ResponsesTranslator) -> tuple[Any, ...]:
    core = translator.core
    result = core.result
    return (core.assembler.events, core.assembler.last_sequence_number, core.sequencer.expected, core.messages,
            core.json_events, result.output_text, result.status, [v.code for v in core.violations],
            translator.failure.message if translator.failure else None)


def grouped(events: list[bytes], group: int) -> list[bytes]:
    return [b"".join(events[at : at + group]) for at in range(0, len(events), group)]


def cut(events: list[bytes], size: int) -> list[bytes]:
    body = b"".join(events)
    return [body[at : at + size] for at in range(0, len(body), size)]


CASES: dict[str, list[bytes]] = {
    "openai": stream(300),
    "unnumbered (llama.cpp)": stream(300, numbered=False, named=False),
    "data lines only": stream(300, named=False),
    "a gap mid-run": stream(300, tweak={150: {"sequence_number": 999}}),
    "another item mid-run": stream(300, tweak={120: {"item_id": "msg_2"}}),
    "another part mid-run": stream(300, tweak={80: {"content_index": 1}}),
    "a null delta": stream(300, tweak={60: {"delta": None}}),
    "a delta of the wrong type": stream(300, tweak={61: {"delta": 5}}),
    "empty deltas": stream(300, words=["" if i % 3 else f" w{i}" for i in range(300)]),
    "escapes and non-ASCII": stream(200, words=[f' "q{i}" \\ é\n💡' for i in range(200)]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("group", [2, 5, 50, 1000])
def test_runs_leave_what_one_event_a_read_leaves(name: str, group: int) -> None:
    events = CASES[name]
    want, one_by_one = translate(events)
    got, many = translate(grouped(events, group))
    assert [c for c in got if not isinstance(c, Finish)] == [c for c in want if not isinstance(c, Finish)]
    assert state(many) == state(one_by_one)


@pytest.mark.parametrize("name", ["openai", "unnumbered (llama.cpp)", "a gap mid-run", "escapes and non-ASCII"])
@pytest.mark.parametrize("size", [1, 7, 100, 1500, 9000])
def test_reads_cut_anywhere_give_the_same(name: str, size: int) -> None:
    events = CASES[name]
    want, one_by_one = translate(events)
    got, many = translate(cut(events, size))
    assert [c for c in got if not isinstance(c, Finish)] == [c for c in want if not isinstance(c, Finish)]
    assert state(many) == state(one_by_one)


class CountingCore(StreamCore):
    """The core, counting the events that went through ``feed`` (the whole path) rather than a lane."""

    fed = 0

    def feed(self, chunk: bytes) -> None:
        self.fed += chunk.count(b"\n\n")
        super().feed(chunk)


def fed_through_core(reads: list[bytes]) -> int:
    translator = ResponsesTranslator(name="t")
    translator.core = core = CountingCore()
    for raw in reads:
        translator.feed(raw)
    translator.finish()
    assert translator.failure is None
    return core.fed


@pytest.mark.parametrize("reads", ["grouped", "cut"])
def test_many_event_reads_take_the_lane(reads: str) -> None:
    events = stream(400)
    shaped = grouped(events, 60) if reads == "grouped" else cut(events, 4000)  # (cut: most reads end mid-event)
    # The whole path: the lifecycle's 7 events and the part's first delta (which opens the lane); every other
    # delta goes through the lane, also after a read that ended inside an event.
    assert fed_through_core(shaped) <= 8 + len(shaped) // 4


def test_what_is_decoded_stays_linear_when_runs_end_often(monkeypatch: pytest.MonkeyPatch) -> None:
    # llama.cpp's framing (every event a window candidate) and another event after every third delta: runs end again
    # and again inside long reads. What is decoded and then refused must stay a small multiple of the input (the
    # windows start small again after each), not the rest of the read each time.
    events = stream(3000, numbered=False, named=False)
    other = b'data: {"type":"response.output_text.annotation.added","item_id":"msg_1","output_index":0,' \
            b'"content_index":0,"annotation_index":0,"annotation":{"type":"file_citation","index":0}}\n\n'
    mixed = [e for at, event in enumerate(events) for e in ([event, other] if 3 < at < 3000 and at % 3 == 0
                                                           else [event])]
    decoded = 0
    real = text_runs._decode_probes

    def counting(data: bytes) -> Any:
        nonlocal decoded
        decoded += len(data)
        return real(data)

    monkeypatch.setattr(text_runs, "_decode_probes", counting)
    chunks, _ = translate(grouped(mixed, 1000))
    assert sum(len(c.text) for c in chunks if isinstance(c, TextDelta)) == len("".join(f" w{i}" for i in range(3000)))
    assert 0 < decoded <= 3 * len(b"".join(mixed))
