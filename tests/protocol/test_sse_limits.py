"""SSE decoder limits: max_event_size and linear time on huge events."""

from __future__ import annotations

import sys
import time

import pytest

from respstream.errors import EventTooLarge
from respstream.protocol.sse import SSEDecoder, SSEEventTooLarge


def feed_all(dec: SSEDecoder, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in chunks:
        dec.feed(chunk)
        out += [m.data for m in dec.events()]
    return out


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
@pytest.mark.parametrize("step", [0, 1, 3, 7], ids=["whole", "1-byte", "3-byte", "7-byte"])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_block_exactly_at_the_limit_passes_one_more_byte_fails(step: int, fast: bool, newline: bytes) -> None:
    # Block size = its bytes up to and including its last line's terminator (not the blank line).
    first = b"data: ok" + newline + newline + newline  # an extra blank line must not count toward the next block
    block = b"event: e" + newline + b"data: " + b"x" * 20 + newline
    limit = len(block)
    for extra, fails in ((b"", False), (b"y", True)):
        big = block.replace(b"x" * 20, b"x" * 20 + extra)
        wire = first + big + newline + b"data: after" + newline + newline
        chunks = [wire[i : i + step] for i in range(0, len(wire), step)] if step else [wire]
        dec = SSEDecoder(max_event_size=limit)
        dec._use_fast = fast
        if not fails:
            assert feed_all(dec, chunks) == [b"ok", b"x" * 20, b"after"]
            continue
        got: list[bytes] = []
        with pytest.raises(EventTooLarge) as info:
            for chunk in chunks:
                dec.feed(chunk)
                got += [m.data for m in dec.events()]
        got += [m.data for m in dec.events()]
        assert got == [b"ok"]  # the event before the oversized one was delivered
        assert info.value.byte_offset == len(first)
        assert f"byte {len(first)}" in str(info.value) and f"({limit} bytes)" in str(info.value)
        assert isinstance(info.value, SSEEventTooLarge)


def test_huge_line_in_small_chunks_fails_before_it_is_buffered() -> None:
    dec = SSEDecoder(max_event_size=64 * 1024)
    dec.feed(b"data: ok\n\n")
    chunk = b"z" * 1024
    fed = 0
    with pytest.raises(EventTooLarge) as info:
        dec.feed(b"data: ")
        for _ in range(1000):
            dec.feed(chunk)
            fed += 1
    assert fed == 63  # stopped as soon as the pending block passed 64 KiB, not at the end of the line
    assert info.value.byte_offset == 10
    assert [m.data for m in dec.events()] == [b"ok"]
    with pytest.raises(EventTooLarge):  # the decoder stays failed
        dec.feed(b"\n\n")
    dec.close()


def test_huge_comment_block_counts_too() -> None:
    # A block with no data is still bytes the decoder must hold on to.
    dec = SSEDecoder(max_event_size=100)
    with pytest.raises(EventTooLarge):
        dec.feed(b":" + b"c" * 200 + b"\n\n")


def _time_feed(chunks: list[bytes]) -> float:
    # CPU time of this process, best of 3: time spent descheduled on a busy machine is not the decoder's work.
    best = float("inf")
    for _ in range(3):
        dec = SSEDecoder()
        start = time.process_time()
        for chunk in chunks:
            dec.feed(chunk)
        msgs = dec.events()
        best = min(best, time.process_time() - start)
        assert len(msgs) == 1 and len(msgs[0].data) == 8 << 20
    return best


@pytest.mark.skipif(sys.gettrace() is not None, reason="a tracer (coverage, debugger) inflates per-call costs")
@pytest.mark.parametrize("shape", ["one-line", "many-lines"])
def test_huge_event_in_small_chunks_is_linear(shape: str) -> None:
    # #62: 8 MiB fed in 1 KiB chunks costs about what it costs fed whole. A quadratic decoder (rescanning or
    # re-copying the pending buffer per chunk) would be ~1000x slower here; 3x plus 20 ms for scheduler noise.
    payload = b"a" * (8 << 20) if shape == "one-line" else (b"b" * 1023 + b"\n") * (8 << 10)
    wire = b"data: " + payload.replace(b"\n", b"\ndata: ") + b"\n\n"
    chunks = [wire[i : i + 1024] for i in range(0, len(wire), 1024)]
    whole = _time_feed([wire])
    chunked = _time_feed(chunks)
    assert chunked <= 3 * whole + 0.02, f"whole {whole * 1e3:.1f} ms, 1 KiB chunks {chunked * 1e3:.1f} ms"
