"""SSE decoder: every vector of spec/sse-parsing.md §1, fed whole, byte by byte, two bytes at a time and split at
every offset, through both the fast path and the exact (forced slow) path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from respstream.errors import BadInputError, EventTooLarge
from respstream.protocol import sse
from respstream.protocol.sse import SSEDecodeError, SSEDecoder, SSEMessage

from .sse_decode import Outcome, decode
from .sse_vectors import RECONNECT_CONN1, RECONNECT_CONN2, VECTORS, Vector


def steps(data: bytes, step: int) -> list[bytes]:
    return [data[i : i + step] for i in range(0, len(data), step)]


def chunkings(vec: Vector) -> Iterator[tuple[str, list[bytes]]]:
    wire = vec.wire
    yield "given", list(vec.chunks)
    if vec.big:
        yield "1000-byte", steps(wire, 1000)
        yield "4093-byte", steps(wire, 4093)
        return
    yield "1-byte", steps(wire, 1)
    yield "2-byte", steps(wire, 2)
    yield "3-byte", steps(wire, 3)
    for cut in range(1, len(wire)):
        yield f"split@{cut}", [wire[:cut], wire[cut:]]


def summary(outcome: Outcome) -> tuple[list[tuple[str, str, str]], int | None, str]:
    msgs, retry, last_id = outcome
    return [(msg.event, msg.text, msg.id) for msg in msgs], retry, last_id


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
@pytest.mark.parametrize("vec", VECTORS, ids=[vec.id for vec in VECTORS])
def test_vector_whole(vec: Vector, fast: bool) -> None:
    got = decode([vec.wire], fast=fast, seed=vec.seed_id)
    assert summary(got) == (list(vec.events), vec.retry, vec.last_event_id)


@pytest.mark.parametrize("vec", VECTORS, ids=[vec.id for vec in VECTORS])
def test_vector_every_chunking(vec: Vector) -> None:
    reference = decode([vec.wire], seed=vec.seed_id)
    assert summary(reference) == (list(vec.events), vec.retry, vec.last_event_id)
    for name, chunks in chunkings(vec):
        for fast in (True, False):
            got = decode(chunks, fast=fast, seed=vec.seed_id)
            # Identical down to the raw data bytes and the offsets, not just the decoded text.
            assert got == reference, f"{vec.id}: {name} ({'fast' if fast else 'exact'}) differs"


def test_cr_terminated_block_dispatches_at_once() -> None:
    # #20: no waiting for the byte after a CR (it might never come).
    dec = SSEDecoder()
    dec.feed(b"data: a\r\r")
    assert [(m.event, m.data) for m in dec.events()] == [("message", b"a")]
    dec.feed(b"\ndata: b\n\n")  # the LF completes the CRLF, it is not a second blank line
    assert [m.data for m in dec.events()] == [b"b"]


def test_partial_block_does_not_leak_into_next_connection() -> None:
    # #46: the first connection's unterminated block (and its id) is dropped at EOF.
    first = SSEDecoder()
    first.feed(RECONNECT_CONN1)
    first.close()
    assert first.events() == []
    assert first.last_event_id == ""
    second = SSEDecoder(last_event_id=first.last_event_id)
    second.feed(RECONNECT_CONN2)
    assert [(m.event, m.text, m.id) for m in second.events()] == [("message", "b", "")]


def test_offsets_count_bom_and_point_at_first_line() -> None:
    wire = sse_vectors_bom() + b": c\ndata: a\n\n\n\nevent: e\r\ndata: b\r\n\r\ndata: c\n\n"
    msgs, _, _ = decode([wire])
    assert [m.offset for m in msgs] == [3, wire.index(b"event: e"), wire.index(b"data: c")]
    for cut in range(1, len(wire)):
        assert [m.offset for m in decode([wire[:cut], wire[cut:]], fast=False)[0]] == [m.offset for m in msgs]


def sse_vectors_bom() -> bytes:
    return b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    "chunks",
    [[b"\xef\xbb\xbf"], [b"\xef", b"\xbb\xbf"], [b"\xef\xbb", b"\xbf"], [b"\xef", b"\xbb"], [b"\xef"]],
    ids=["bom-only", "bom-1+2", "bom-2+1", "truncated-2", "truncated-1"],
)
def test_bom_alone_or_truncated_at_eof_yields_nothing(chunks: list[bytes]) -> None:
    assert decode(chunks) == ([], None, "")


def test_truncated_bom_then_more_bytes_is_garbage() -> None:
    # "\xef\xbb" followed by "x" is not a BOM: the first field name is unknown.
    assert summary(decode([b"\xef\xbb", b"xdata: 1\n\ndata: 2\n\n"])) == ([("message", "2", "")], None, "")


def test_text_property_replaces_invalid_utf8() -> None:
    msg = SSEMessage(event="message", data=b"a\xffb", id="", offset=0)
    assert msg.text == "a\ufffdb"


def test_events_drains() -> None:
    dec = SSEDecoder()
    dec.feed(b"data: 1\n\ndata: 2\n\n")
    assert len(dec.events()) == 2
    assert dec.events() == []
    assert dec.bytes_seen == 18


def test_feed_after_close_is_an_error_and_close_is_idempotent() -> None:
    dec = SSEDecoder()
    dec.feed(b"")  # empty chunks are fine
    dec.close()
    dec.close()
    with pytest.raises(ValueError, match="after close"):
        dec.feed(b"data: x\n\n")


def test_max_event_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_event_size"):
        SSEDecoder(max_event_size=0)


def test_retry_in_unparsed_partial_block_is_visible_before_eof() -> None:
    # The fast path keeps "retry: 5\ndata: x\n" raw; reading .retry must still see the complete retry line.
    dec = SSEDecoder()
    dec.feed(b"data: a\n\nretry: 5\ndata: x\n")
    assert dec.retry == 5
    dec.feed(b"\n")
    assert [m.text for m in dec.events()] == ["a", "x"]
    assert dec.retry == 5


def test_bom_split_with_chunk_longer_than_bom() -> None:
    assert summary(decode([b"\xef\xbb", b"\xbfdata: a\n\n"])) == ([("message", "a", "")], None, "")


def test_errors_are_bad_input() -> None:
    assert issubclass(sse.SSEEventTooLarge, EventTooLarge)
    assert issubclass(sse.SSEEventTooLarge, SSEDecodeError)
    assert issubclass(SSEDecodeError, BadInputError)
    assert sse.SSEEventTooLarge.code == "input.event_too_large"


def test_dunder_all_is_complete() -> None:
    public = {name for name in vars(sse) if not name.startswith("_")} - {"annotations", "re", "msgspec"}
    public -= {"BadInputError", "EventTooLarge", "Final", "NoReturn"}
    assert public == set(sse.__all__)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
def test_many_distinct_event_names_past_the_name_cache(fast: bool) -> None:
    # The name caches are bounded; names past the bound must still decode right.
    wire = b"".join(b"event: ev%d\ndata: %d\n\n" % (i, i) for i in range(1500))
    msgs, _, _ = decode([wire], fast=fast)
    assert [(m.event, m.data) for m in msgs] == [(f"ev{i}", b"%d" % i) for i in range(1500)]


def test_read_ending_in_three_line_ends_after_the_first_read() -> None:
    # A later read of whole events whose last blank line is followed by a third LF (the next read holds the rest).
    wire = [b"data: a\n\n", b"data: b\n\n\n", b"\ndata: c\n\n", b"data: d\n\n\n", b"data: e\n\n"]
    for fast in (True, False):
        msgs, _, _ = decode(wire, fast=fast)
        joined = b"".join(wire)
        assert [(m.data, m.offset) for m in msgs] == [
            (x, joined.index(b"data: " + x)) for x in (b"a", b"b", b"c", b"d", b"e")
        ]
