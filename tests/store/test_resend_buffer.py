"""The Redis store's resend buffer (issue 16): what it hands back, and that every bound holds."""

from __future__ import annotations

from store_helpers import entries, event

from respstream.server.store.base import LogEntry
from respstream.server.store.redis_resend import ResendBuffer


def _sized(seq: int, size: int) -> LogEntry:
    return LogEntry(seq, "response.output_text.delta", b"x" * size)


def test_missing_hands_back_exactly_the_lost_run_or_none() -> None:
    buffer = ResendBuffer(per_response=8)
    buffer.remember("a", entries(0, 5))
    buffer.remember("a", entries(5, 12))
    assert buffer.missing("a", 5, 9) == entries(6, 9)
    assert buffer.missing("a", 3, 9) == entries(4, 9)  # only the last 8 (4..11) are kept
    assert buffer.missing("a", 2, 9) is None  # 3 was dropped
    assert buffer.missing("a", 4, 12) == entries(5, 12)
    assert buffer.missing("b", 0, 2) is None


def test_a_terminal_or_forget_drops_the_response_and_its_bytes() -> None:
    buffer = ResendBuffer()
    buffer.remember("a", entries(0, 3))
    assert buffer.bytes == sum(len(e.data) for e in entries(0, 3))
    buffer.remember("a", [event(3, terminal=True)])
    assert len(buffer) == 0 and buffer.bytes == 0
    buffer.remember("b", entries(0, 3))
    buffer.forget("b")
    assert len(buffer) == 0 and buffer.bytes == 0


def test_the_byte_budget_drops_the_least_recently_appended_response_first() -> None:
    buffer = ResendBuffer(per_response=100, max_bytes=1000)
    buffer.remember("old", [_sized(0, 400)])
    buffer.remember("new", [_sized(0, 400)])
    buffer.remember("old", [_sized(1, 100)])  # "old" is now the most recent
    buffer.remember("third", [_sized(0, 300)])  # 1200 > 1000: "new" goes
    assert buffer.missing("new", -1, 1) is None
    assert buffer.missing("old", -1, 2) is not None and buffer.bytes == 800
    buffer.remember("big", [_sized(0, 600), _sized(1, 600)])  # alone over the budget: keeps what fits
    assert buffer.bytes <= 1000 and buffer.missing("big", 0, 2) == [_sized(1, 600)]


def test_the_response_count_is_bounded() -> None:
    buffer = ResendBuffer(responses=3)
    for name in "abcde":
        buffer.remember(name, entries(0, 1))
    assert len(buffer) == 3 and buffer.missing("a", -1, 1) is None and buffer.missing("e", -1, 1) is not None


def test_zero_keeps_nothing() -> None:
    for buffer in (ResendBuffer(per_response=0), ResendBuffer(max_bytes=0)):
        buffer.remember("a", entries(0, 3))
        assert len(buffer) == 0 and buffer.bytes == 0
