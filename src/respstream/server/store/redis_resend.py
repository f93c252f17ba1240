"""The Redis store's memory of its own recent appends, so a log that lost its tail in a failover is repaired.

Why: Redis replicates asynchronously. A primary can acknowledge an append and die before its replica received it;
the replica that takes over then holds the log without that tail. The append script refuses the next append
(``gap:<last>``: it would leave a hole), and the store resends the missing entries from here, byte for byte the ones
it had acknowledged (readers that saw them on the old primary see the same events again at the same numbers), then
the new batch, in one script call. Only entries recent enough to be still unreplicated matter, so each response
keeps its last ``per_response`` entries, at most ``responses`` responses are remembered (least recently appended
dropped first), and a response is forgotten once its terminal is appended or it is deleted. A loss larger than that
cannot be repaired: the caller gets ``SequenceGap`` and the response fails with a clear error instead of a hole.
"""

from __future__ import annotations

from collections import deque

from respstream.server.store.base import LogEntry

__all__ = ["ResendBuffer"]


class ResendBuffer:
    def __init__(self, per_response: int = 256, responses: int = 10_000) -> None:
        self.per_response = per_response
        self.responses = responses
        self._recent: dict[str, deque[LogEntry]] = {}  # insertion order = least recently appended first

    def __len__(self) -> int:
        return len(self._recent)

    def remember(self, response_id: str, entries: list[LogEntry]) -> None:
        """``entries`` were just acknowledged by Redis."""
        if self.per_response <= 0:
            return
        if entries[-1].terminal:  # ended: the log can no longer be appended to, nothing to resend
            self._recent.pop(response_id, None)
            return
        recent = self._recent.pop(response_id, None)  # re-inserted: most recently appended last
        if recent is None:
            recent = deque(maxlen=self.per_response)
            while len(self._recent) >= self.responses:
                del self._recent[next(iter(self._recent))]
        recent.extend(entries)
        self._recent[response_id] = recent

    def forget(self, response_id: str) -> None:
        self._recent.pop(response_id, None)

    def missing(self, response_id: str, after: int, before: int) -> list[LogEntry] | None:
        """The remembered entries numbered ``after + 1 .. before - 1``, in order; None when any is not here."""
        want = before - after - 1
        recent = self._recent.get(response_id)
        if recent is None or want > len(recent):
            return None
        found = [e for e in recent if after < e.sequence_number < before]
        if len(found) != want or any(e.sequence_number != after + 1 + i for i, e in enumerate(found)):
            return None
        return found
