"""The native translator's multi-event lane (ResponsesTranslator.feed on a read of several whole events): the chunks
it gives, flattened, are the chunks of the same events read one by one, for every recording and grouping; its
leading text deltas come as one TextRun."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from respstream.server.upstream.base import Chunk, Finish, TextDelta, TextRun, singles
from respstream.server.upstream.responses.stream import ResponsesTranslator

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "data" / "native_recordings").glob("*.sse")) + sorted((ROOT / "transcripts").glob("*.sse"))


def events_of(body: bytes) -> list[bytes]:
    ends = [m.end() for m in re.finditer(rb"\r?\n\r?\n", body)]
    return [body[a:b] for a, b in zip([0, *ends], [*ends, len(body)], strict=True) if body[a:b]]


# What follows the terminal in the same read is seen, and counted, only as far as that read goes (the gateway stops
# reading at the terminal): these repair counts depend on where the reads end.
LATE = ("lifecycle.terminal_not_last", "lifecycle.multiple_terminal", "item.delta_after_done")


def translate(reads: list[bytes]) -> tuple[list[Any], list[list[Chunk]], str | None]:
    translator = ResponsesTranslator(name="t")
    batches = [translator.feed(raw) for raw in reads] + [translator.finish()]
    flat: list[Any] = [c for b in batches for c in singles(b)]
    if flat and isinstance(flat[-1], Finish):
        repairs = {k: v for k, v in flat[-1].repairs.items() if k not in LATE}
        flat[-1] = msgspec.structs.replace(flat[-1], repairs=repairs)
    failure = translator.failure.message if translator.failure is not None else None
    return flat, batches, failure


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("group", [2, 3, 7, 1000])
def test_reads_of_several_events_give_the_chunks_of_one_by_one(path: Path, group: int) -> None:
    events = events_of(path.read_bytes())
    want, _, want_failure = translate(events)
    grouped = [b"".join(events[at : at + group]) for at in range(0, len(events), group)]
    got, _, failure = translate(grouped)
    assert got == want
    assert failure == want_failure


def test_a_read_of_text_deltas_is_one_text_run() -> None:
    events = events_of((ROOT / "data" / "native_recordings" / "local_completed_without_output.sse").read_bytes())
    head, deltas, tail = events[:4], events[4:8], events[8:]
    # (the lane opens once the part's first delta went through the whole core)
    _, batches, _ = translate([b"".join([*head, deltas[0]]), b"".join(deltas[1:]), b"".join(tail)])
    assert batches[0] == [TextDelta("The sky")]
    assert batches[1] == [TextRun([" is blue", " because of Rayleigh", " scattering."])]
    # A run, then the events the lane does not take, in one read: the run first, then what feed makes of the rest.
    _, batches, _ = translate([b"".join([*head, deltas[0]]), b"".join([*deltas[1:3], *deltas[3:], *tail])])
    assert batches[1][0] == TextRun([" is blue", " because of Rayleigh", " scattering."])
    assert isinstance(batches[1][-1], Finish)
