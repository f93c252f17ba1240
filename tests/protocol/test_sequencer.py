"""Sequencer: DESIGN §3 rules (dedupe, reorder window, gaps, stragglers, missing numbers), O(window) memory."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from respstream.protocol.events import Event, UnknownEvent
from respstream.protocol.sequencer import Sequencer, Violation


def ev(seq: int | None) -> Event:
    return UnknownEvent(sequence_number=seq, event_type="keepalive")


def run(numbers: list[int | None], **kw: int) -> tuple[list[int | None], list[tuple[str, int | None]]]:
    s = Sequencer(**kw)
    out: list[Event] = []
    for n in numbers:
        out += s.push(ev(n))
    out += s.close()
    return [e.sequence_number for e in out], [(v.code, v.sequence_number) for v in s.violations]


def test_in_order_passes_straight_through() -> None:
    assert run([0, 1, 2, 3]) == ([0, 1, 2, 3], [])


def test_starting_after_moves_the_expected_number() -> None:
    assert run([6, 7], starting_after=5) == ([6, 7], [])
    assert run([5, 6], starting_after=5) == ([6], [("sequence.duplicate", 5)])


def test_duplicate_of_delivered_and_of_pending_are_dropped() -> None:
    assert run([0, 1, 1, 0]) == ([0, 1], [("sequence.duplicate", 1), ("sequence.duplicate", 0)])
    assert run([0, 2, 2, 1]) == (
        [0, 1, 2],
        [("sequence.duplicate", 2), ("sequence.out_of_order", 1)],
    )


def test_reorder_within_window_is_repaired_and_reported_once() -> None:
    assert run([0, 3, 2, 1, 4]) == ([0, 1, 2, 3, 4], [("sequence.out_of_order", 1)])


def test_window_overflow_declares_gap_and_straggler_is_out_of_order() -> None:
    numbers, violations = run([0, 2, 3, 4, 1, 5], window=2)
    assert numbers == [0, 2, 3, 4, 5]
    assert violations == [("sequence.gap", 1), ("sequence.out_of_order", 1)]


def test_gap_at_eof_reported_once_per_range() -> None:
    numbers, violations = run([0, 1, 4, 5, 8])
    assert numbers == [0, 1, 4, 5, 8]
    assert violations == [("sequence.gap", 2), ("sequence.gap", 6)]


def test_stream_not_starting_at_zero_has_a_gap_at_zero() -> None:
    assert run([3, 4]) == ([3, 4], [("sequence.gap", 0)])


def test_missing_numbers_pass_through_with_one_report() -> None:
    numbers, violations = run([None, None, 0, None, 1])
    assert numbers == [None, None, 0, None, 1]
    assert violations == [("sequence.missing", None)]


def test_unnumbered_event_is_not_held_behind_a_pending_one() -> None:
    s = Sequencer()
    assert s.push(ev(1)) == []
    assert [e.sequence_number for e in s.push(ev(None))] == [None]
    assert s.pending == 1
    assert [e.sequence_number for e in s.push(ev(0))] == [0, 1]


def test_push_into_drain_and_properties() -> None:
    s = Sequencer(window=4)
    out: list[Event] = []
    s.push_into(ev(0), out)
    s.push_into(ev(0), out)
    assert [e.sequence_number for e in out] == [0]
    assert s.low_water_mark == 0
    assert s.drain_violations() == [Violation("sequence.duplicate", 0, s.violations[0].message)]
    assert s.drain_violations() == []
    assert s.violations[0].to_json()["code"] == "sequence.duplicate"


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window"):
        Sequencer(window=0)


def test_memory_stays_bounded_by_the_window() -> None:
    s = Sequencer(window=8)
    for n in range(0, 30_000, 3):  # two of every three numbers are lost: gaps all the way
        s.push(ev(n + 1))
        assert s.pending <= 8
    assert len(s._declared) <= 8


@given(st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=40)), max_size=80), st.integers(1, 8))
def test_any_arrival_order_releases_each_number_once_in_order(numbers: list[int | None], window: int) -> None:
    released, _ = run(numbers, window=window)
    numbered = [n for n in released if n is not None]
    assert numbered == sorted(set(numbered))
    assert set(numbered) <= {n for n in numbers if n is not None}
    assert released.count(None) == numbers.count(None)


def test_shuffled_within_window_loses_nothing() -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    numbers: list[int | None] = list(range(500))
    for i in range(0, 500, 8):  # shuffle inside blocks of 8, well within the window
        block = numbers[i : i + 8]
        rng.shuffle(block)
        numbers[i : i + 8] = block
    released, violations = run(numbers, window=16)
    assert released == list(range(500)), f"seed={seed}"
    assert all(code == "sequence.out_of_order" for code, _ in violations), f"seed={seed}"
