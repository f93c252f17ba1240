"""Property tests: random streams from the vectors' alphabet decode the same through the fast path, the exact path,
any chunking, and a tiny independent reference written straight from WHATWG §9.2.6 (on decoded text)."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from respstream.protocol import sse

from .sse_decode import decode

# Pieces the vectors are made of: field names (right and near-miss), separators, every line ending, BOM, NUL,
# multi-byte and invalid UTF-8, digits for retry.
ALPHABET = [
    b"data",
    b"data:",
    b"data: ",
    b"event:",
    b"event: ",
    b"id:",
    b"id: ",
    b"retry:",
    b"retry: ",
    b"Data:",
    b":",
    b": ping",
    b" ",
    b"\t",
    b"x",
    b"msg",
    b"0",
    b"42",
    b"\0",
    b"\n",
    b"\n",
    b"\n\n",
    b"\r",
    b"\r\n",
    b"\xef\xbb\xbf",
    b"\xef",
    b"\xe2\x82\xac",
    b"\xff",
]
# Mostly well-formed LF blocks so the fast path's shapes are hit often, mixed with anything at all.
_PREFIX = st.sampled_from([b"", b"id: 2\n", b"id:  3\n", b"id: 4\0\n"])
BLOCK = st.tuples(
    _PREFIX,
    st.sampled_from(
        [b"", b"event: e\n", b"event:\n", b"id: 1\n", b"id: \0\n", b": c\n", b"retry: 5\n", b"event: f\r\n"]
    ),
    st.sampled_from([b"data: ", b"data:", b"data", b"data:  "]),
    st.binary(max_size=6).filter(lambda b: b"\n" not in b and b"\r" not in b),
    st.sampled_from([b"\n\n", b"\n", b"\ndata: more\n\n", b"\r\n\r\n", b"\n\n\n"]),
).map(b"".join)
STREAM = st.lists(st.one_of(st.sampled_from(ALPHABET), BLOCK), max_size=40).map(b"".join)

_LINE = re.compile(r"\r\n|\r|\n")


def reference(wire: bytes, seed: str = "") -> tuple[list[tuple[str, str, str]], int | None, str]:
    """WHATWG §9.2.6, transcribed naively: decode everything, strip one BOM, split lines, interpret."""
    text = wire.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    events: list[tuple[str, str, str]] = []
    data, event_type, id_buf, last_id, retry = "", "", seed, seed, None
    parts = _LINE.split(text)
    for line in parts[:-1]:  # the last piece is not a line (no end): discarded at EOF
        if line == "":
            last_id = id_buf
            if data == "":
                event_type = ""
                continue
            events.append((event_type or "message", data.removesuffix("\n"), last_id))
            data, event_type = "", ""
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data += value + "\n"
        elif field == "event":
            event_type = value
        elif field == "id":
            if "\0" not in value:
                id_buf = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return events, retry, last_id


def cut(wire: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({p % (len(wire) + 1) for p in points})
    pieces, last = [], 0
    for b in bounds:
        pieces.append(wire[last:b])
        last = b
    pieces.append(wire[last:])
    return pieces


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wire=STREAM, points=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
@example(wire=b"event: e\n\n\ndata: x\n\n", points=[9])
@example(wire=b"data: a\r\n\r\ndata: b\n\n", points=[8, 9])
def test_fast_exact_reference_and_chunking_agree(wire: bytes, points: list[int]) -> None:
    whole_fast = decode([wire], fast=True)
    whole_exact = decode([wire], fast=False)
    assert whole_fast == whole_exact
    msgs, retry, last_id = whole_fast
    assert ([(m.event, m.text, m.id) for m in msgs], retry, last_id) == reference(wire)
    pieces = cut(wire, points)
    assert decode(pieces, fast=True) == whole_fast
    assert decode(pieces, fast=False) == whole_fast


@settings(max_examples=60, deadline=None)
@given(wire=STREAM)
def test_byte_by_byte_equals_whole(wire: bytes) -> None:
    whole = decode([wire], fast=True)
    assert decode([wire[i : i + 1] for i in range(len(wire))], fast=True) == whole
    assert decode([wire[i : i + 2] for i in range(0, len(wire), 2)], fast=False) == whole


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(
            st.sampled_from([None, "e", "response.output_text.delta", "", " sp"]),
            st.sampled_from([None, "7", ""]),
            st.text(alphabet=st.characters(blacklist_characters="\r\n", codec="utf-8"), max_size=20),
        ),
        max_size=20,
    ),
    crlf=st.booleans(),
    id_first=st.booleans(),
    points=st.lists(st.integers(min_value=0, max_value=5_000), max_size=4),
)
def test_well_formed_streams(
    blocks: list[tuple[str | None, str | None, str]], crlf: bool, id_first: bool, points: list[int]
) -> None:
    # The shapes servers actually send, LF or CRLF framed: the fast path takes most of them.
    nl = "\r\n" if crlf else "\n"
    wire = "".join(
        (f"id: {i}{nl}" if i is not None and id_first else "")
        + (f"event: {ev}{nl}" if ev is not None else "")
        + (f"id: {i}{nl}" if i is not None and not id_first else "")
        + f"data: {d}{nl}{nl}"
        for ev, i, d in blocks
    ).encode()
    expected = reference(wire)
    got = decode(cut(wire, points), fast=True)
    assert ([(m.event, m.text, m.id) for m in got[0]], got[1], got[2]) == expected
    assert got == decode([wire], fast=False)


@settings(max_examples=300, deadline=None)
@given(wire=STREAM, window=st.integers(min_value=1, max_value=40), points=st.lists(st.integers(0, 10_000), max_size=3))
def test_small_fast_path_window(wire: bytes, window: int, points: list[int]) -> None:
    # The fast path splits 64 KiB windows; shrink the window so blocks straddle window edges and outgrow windows.
    expected = decode([wire], fast=False)
    with mock.patch.object(sse, "_WINDOW", window):
        assert decode([wire], fast=True) == expected
        assert decode(cut(wire, points), fast=True) == expected


@pytest.mark.parametrize("delta", [-3, -2, -1, 0, 1, 2])
def test_blocks_around_the_real_window_size(delta: int) -> None:
    small = b"event: e\ndata: 1\n\n"
    big = b"event: big\ndata: " + b"x" * (sse._WINDOW + delta - 18) + b"\n\n"
    for lead in (0, 1, 17, 1000):
        wire = small * lead + big + small * 3 + big + small
        expected = decode([wire], fast=False)
        assert len(expected[0]) == lead + 6
        assert decode([wire], fast=True) == expected
