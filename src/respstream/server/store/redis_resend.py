"""The Redis store's memory of its own recent appends, so a log that lost its tail in a failover is repaired.

Why: Redis replicates asynchronously. A primary can acknowledge an append and die before its replica received it;
the replica that takes over then holds the log without that tail. The append script refuses the next append
(``gap:<last>``: it would leave a hole), and the store resends the missing entries from here, byte for byte the ones
it had acknowledged (readers that saw them on the old primary see the same events again at the same numbers), then
the new batch, in one script call. Only entries recent enough to be still unreplicated matter, so each response
keeps its last ``per_response`` entries, all responses together at most ``max_bytes`` of event data and at most
``responses`` responses (least recently appended dropped first), and a response is forgotten once its terminal is
appended or it is deleted. A loss larger than what is kept cannot be repaired: the caller gets ``SequenceGap`` and
the response fails with a clear error instead of a hole. Every operation is O(entries appended or dropped).
"""

from __future__ import annotations

from collections import deque

from respstream.server.store.base import LogEntry

__all__ = ["ResendBuffer"]


class _Recent:
    __slots__ = ("entries", "size")

    def __init__(self) -> None:
        self.entries: deque[LogEntry] = deque()
        self.size = 0  # bytes of event data held


class ResendBuffer:
    def __init__(self, per_response: int = 256, max_bytes: int = 64 << 20, responses: int = 10_000) -> None:
        self.per_response = per_response
        self.max_bytes = max_bytes
        self.responses = responses
        self.bytes = 0
        self._recent: dict[str, _Recent] = {}  # insertion order = least recently appended first

    def __len__(self) -> int:
        return len(self._recent)

    def remember(self, response_id: str, entries: list[LogEntry]) -> None:
        """``entries`` were just acknowledged by Redis."""
        if entries[-1].terminal or self.per_response <= 0 or self.max_bytes <= 0:
            self.forget(response_id)  # ended: the log can no longer be appended to, nothing to resend
            return
        recent = self._recent.pop(response_id, None)  # re-inserted: most recently appended last
        if recent is None:
            recent = _Recent()
        self._recent[response_id] = recent
        added = 0
        for entry in entries:
            recent.entries.append(entry)
            added += len(entry.data)
        recent.size += added
        self.bytes += added
        while len(recent.entries) > self.per_response:
            self._drop_oldest_entry(recent)
        while len(self._recent) > self.responses or (self.bytes > self.max_bytes and len(self._recent) > 1):
            self.forget(next(iter(self._recent)))
        while self.bytes > self.max_bytes and recent.entries:  # one response alone over the budget
            self._drop_oldest_entry(recent)

    def _drop_oldest_entry(self, recent: _Recent) -> None:
        size = len(recent.entries.popleft().data)
        recent.size -= size
        self.bytes -= size

    def forget(self, response_id: str) -> None:
        recent = self._recent.pop(response_id, None)
        if recent is not None:
            self.bytes -= recent.size

    def missing(self, response_id: str, after: int, before: int) -> list[LogEntry] | None:
        """The remembered entries numbered ``after + 1 .. before - 1``, in order; None when any is not here."""
        want = before - after - 1
        recent = self._recent.get(response_id)
        if recent is None or want > len(recent.entries):
            return None
        found = [e for e in recent.entries if after < e.sequence_number < before]
        if len(found) != want or any(e.sequence_number != after + 1 + i for i, e in enumerate(found)):
            return None
        return found
