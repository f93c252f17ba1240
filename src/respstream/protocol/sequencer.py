"""Put events back in ``sequence_number`` order: drop duplicates, repair reordering, report gaps (DESIGN §3).

How this works: ``expected`` is the next number we can release. An event carrying it is released at once, followed
by any consecutive ones that were waiting. An early event waits in ``pending`` (at most ``window`` of them); when the
window overflows, or at EOF, the missing range below the lowest waiting event is declared a ``sequence.gap`` and the
stream moves on. A number at or below the low-water mark (``expected - 1``) or already waiting is a duplicate, unless
it lies in a range we declared missing: then it is a straggler, reported ``sequence.out_of_order`` and dropped (it is
too late to deliver it in order). Events without a number pass straight through, and the stream gets one
``sequence.missing``. Memory is O(window): ``pending`` holds at most ``window`` events and we remember at most
``window`` declared gap ranges.

The fast path (the common case: the number we expect, nothing waiting) is a compare and an append.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import msgspec

from respstream.protocol.events import Event

__all__ = ["DEFAULT_WINDOW", "Sequencer", "Violation"]

DEFAULT_WINDOW: Final = 64


class Violation(msgspec.Struct, frozen=True):
    """One protocol violation: a stable ``code`` (DESIGN §3), where it happened, and a human-readable message."""

    code: str
    sequence_number: int | None
    message: str

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "sequence_number": self.sequence_number, "message": self.message}


class Sequencer:
    """Releases events in ``sequence_number`` order.

    ``push(event)`` returns the events that can be released now (possibly none, possibly several); ``close()``
    releases whatever is still waiting at EOF, declaring the holes as gaps. Violations accumulate in
    ``violations`` (and, for incremental consumers, in ``drain_violations()``). Never raises on stream content.
    """

    __slots__ = ("_declared", "_missing_reported", "_new", "_pending", "expected", "violations", "window")

    def __init__(self, *, starting_after: int | None = None, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.expected = 0 if starting_after is None else starting_after + 1
        self.window = window
        self._pending: dict[int, Event] = {}
        # Ranges [first, last] we declared missing; bounded so memory stays O(window).
        self._declared: deque[tuple[int, int]] = deque(maxlen=window)
        self._missing_reported = False
        self.violations: list[Violation] = []
        self._new = 0  # index into violations of the first one not yet drained

    @property
    def pending(self) -> int:
        """How many early events are waiting for a missing one."""
        return len(self._pending)

    @property
    def low_water_mark(self) -> int:
        """The highest number released (or skipped) so far; ``expected - 1``."""
        return self.expected - 1

    def drain_violations(self) -> list[Violation]:
        """Violations found since the previous call (for callers that interleave them with other reports)."""
        new = self.violations[self._new :]
        self._new = len(self.violations)
        return new

    def push(self, event: Event) -> list[Event]:
        """Accept one event; return the events released by it, in order."""
        out: list[Event] = []
        self.push_into(event, out)
        return out

    def push_into(self, event: Event, out: list[Event]) -> None:
        """Like :meth:`push`, appending released events to ``out`` (saves a list per event on hot paths)."""
        seq = event.sequence_number
        if seq == self.expected and not self._pending:
            self.expected = seq + 1
            out.append(event)
            return
        if seq is None:
            if not self._missing_reported:
                self._missing_reported = True
                self.violations.append(
                    Violation("sequence.missing", None, f"a {event.type or 'typeless'} event has no sequence_number")
                )
            out.append(event)
            return
        if seq < self.expected:
            self._late(seq, event)
            return
        if seq in self._pending:
            self.violations.append(
                Violation("sequence.duplicate", seq, f"sequence_number {seq} arrived twice; the copy was dropped")
            )
            return
        if seq == self.expected:
            # The missing one arrived: the reorder is repaired; report it once, here.
            self.violations.append(
                Violation(
                    "sequence.out_of_order",
                    seq,
                    f"sequence_number {seq} arrived after {len(self._pending)} later event(s); order restored",
                )
            )
            self.expected = seq + 1
            out.append(event)
            self._release(out)
            return
        self._pending[seq] = event
        if len(self._pending) > self.window:
            self._skip_to_lowest(out, "the reorder window overflowed")

    def close(self) -> list[Event]:
        """EOF: declare every remaining hole a gap and release everything still waiting, in order."""
        out: list[Event] = []
        while self._pending:
            self._skip_to_lowest(out, "the stream ended")
        return out

    # --- internals ----------------------------------------------------------------------------------------------

    def _late(self, seq: int, event: Event) -> None:
        for first, last in self._declared:
            if first <= seq <= last:
                self.violations.append(
                    Violation(
                        "sequence.out_of_order",
                        seq,
                        f"sequence_number {seq} arrived after its gap was declared; dropped",
                    )
                )
                return
        self.violations.append(
            Violation("sequence.duplicate", seq, f"sequence_number {seq} was already delivered; the copy was dropped")
        )

    def _release(self, out: list[Event]) -> None:
        pending = self._pending
        expected = self.expected
        while expected in pending:
            out.append(pending.pop(expected))
            expected += 1
        self.expected = expected

    def _skip_to_lowest(self, out: list[Event], why: str) -> None:
        lowest = min(self._pending)
        first, last = self.expected, lowest - 1
        self._declared.append((first, last))
        count = last - first + 1
        span = f"{first}" if count == 1 else f"{first}..{last}"
        self.violations.append(
            Violation("sequence.gap", first, f"sequence_number {span} never arrived ({count} missing; {why})")
        )
        self.expected = lowest
        self._release(out)
