"""The store behind every response: an append-only event log plus a record, and conversation history.

How this works: a response is a log of ``LogEntry`` (sequence number, event type, the event's JSON bytes) that only
ever grows, and a ``ResponseRecord``. The writer appends; every reader — the first foreground stream, a resumed
stream, a reader on another gateway instance — reads ``after`` a sequence number and then tails until the terminal
entry. Entries are dialect-neutral JSON: the SSE frame (``event: message`` or ``event: <type>``, ``id:``) is built
when sending.

Implementations: ``memory`` (one process), ``sqlite`` (one machine, survives restarts), ``redis`` (many instances).
All pass the same test suite (tests/store/).

Leases (a crashed generator never leaves a reader hanging): the runner wraps generation in
``async with store.hold_lease(response_id):``. While the block runs the store renews a lease every
``lease_seconds / 3``; on exit the lease is released. A log that was leased, whose lease is gone (expired or released)
and that has no terminal entry is *lost*: the first tail reader (or ``expire()``) that notices appends the terminal
``error`` ``worker_lost`` (see ``lease.worker_lost_entries``), atomically, so there is exactly one terminal and its
sequence number is last + 1. A log never leased is only ended by ``recover(instance_id)``, which a gateway calls once
at startup for its own instance id. So: the runner must append its terminal *inside* the ``hold_lease`` block.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import msgspec

__all__ = ["ConversationRecord", "DeltaEntry", "DeltaTemplate", "Entry", "LogEntry", "ResponseRecord",
           "SequenceConflict", "SequenceGap", "Store", "StoreUnavailable"]


class LogEntry(msgspec.Struct, frozen=True, gc=False):
    """One event of a log. A msgspec Struct (immutable, not GC-tracked): built once per event, ~15x cheaper than a
    frozen dataclass."""

    sequence_number: int
    type: str
    data: bytes  # the event as compact JSON, `type` and `sequence_number` included
    terminal: bool = False


class DeltaTemplate:
    """The bytes around the delta of every text delta of one content part (the writer makes one per part):
    ``prefix + <sequence number> + middle + <the delta as a JSON string> + tail`` is the event's JSON.

    ``data_fmt % (sequence_number, piece)`` builds it in one step; ``frame_message`` / ``frame_typed``
    ``% (sequence_number, sequence_number, piece)`` build the whole SSE frame (``id:``, ``event: message`` or
    ``event: <type>``, ``data:``); ``frame_bare % (sequence_number, piece)`` the Open Responses frame (no ``id:``)."""

    __slots__ = ("data_fmt", "fixed_len", "frame_bare", "frame_message", "frame_typed", "type")

    def __init__(self, event_type: str, prefix: bytes, middle: bytes, tail: bytes) -> None:
        def esc(b: bytes) -> bytes:
            return b.replace(b"%", b"%%")

        self.type = event_type
        fmt = esc(prefix) + b"%d" + esc(middle) + b"%b" + esc(tail)
        self.data_fmt = fmt
        self.fixed_len = len(prefix) + len(middle) + len(tail)
        self.frame_message = b"id: %d\nevent: message\ndata: " + fmt + b"\n\n"
        self.frame_typed = b"id: %d\nevent: " + esc(event_type.encode()) + b"\ndata: " + fmt + b"\n\n"
        self.frame_bare = b"event: " + esc(event_type.encode()) + b"\ndata: " + fmt + b"\n\n"


class DeltaEntry(msgspec.Struct, frozen=True, gc=False):
    """A text delta kept compactly by the memory store: its JSON-encoded delta string and its part's template
    (about 90 bytes per event instead of ~270 for a :class:`LogEntry` and its JSON). Reads as a LogEntry
    (``type``, ``data``, ``terminal``); :meth:`entry` makes a real one."""

    sequence_number: int
    piece: bytes  # the delta as a JSON string, quotes included
    template: DeltaTemplate
    terminal: ClassVar[bool] = False

    @property
    def type(self) -> str:
        return self.template.type

    @property
    def data(self) -> bytes:
        return self.template.data_fmt % (self.sequence_number, self.piece)

    def entry(self) -> LogEntry:
        return LogEntry(self.sequence_number, self.template.type, self.data)


Entry = LogEntry | DeltaEntry  # what the memory store keeps; every other reader sees LogEntry


@dataclass(slots=True)
class ResponseRecord:
    id: str
    status: str  # queued | in_progress | completed | incomplete | failed | cancelled
    created_at: float  # unix seconds (the dialect decides how it is shown)
    background: bool = False
    dialect: str = "platform"
    owner: str | None = None  # hash of the API key that created it; None when the server is open
    instance_id: str | None = None  # the gateway instance generating it (lease holder)
    response: dict[str, Any] = field(default_factory=dict)  # the latest Response object snapshot
    request: dict[str, Any] = field(default_factory=dict)  # the validated request (for previous_response_id)
    conversation_id: str | None = None


@dataclass(slots=True)
class ConversationRecord:
    """A Conversations API object (``POST /v1/conversations``, or made on first use of a platform
    ``conversation_id``). Its items are the conversation history (``conversation()``)."""

    id: str
    created_at: float  # unix seconds
    owner: str | None = None  # hash of the API key that created it; None when the server is open
    metadata: dict[str, str] = field(default_factory=dict)


class StoreUnavailable(Exception):
    """The backing service (Redis, the SQLite file) cannot be reached. Before streaming: 503; during: ``error``."""


class SequenceConflict(Exception):
    """An append was refused: a sequence number at or below one already in the log, or the log already ended.

    Also raised to a writer whose log was ended as ``worker_lost`` behind its back (its lease had expired).
    Nothing of the refused batch is written.
    """


class SequenceGap(Exception):
    """An append was refused because its first new sequence number is past the log's next one (``log_next``): the
    log lost entries it had acknowledged (a Redis primary failed over to a replica that had not received them), and
    appending anyway would leave a hole. Nothing of the refused batch is written. The Redis store first resends the
    missing entries itself from its bounded buffer of recent appends; this reaches the caller only when it cannot.
    """

    def __init__(self, message: str, log_next: int) -> None:
        super().__init__(message)
        self.log_next = log_next


class Store(Protocol):
    async def create(self, record: ResponseRecord) -> None: ...

    async def get(self, response_id: str) -> ResponseRecord | None: ...

    async def update(self, record: ResponseRecord) -> None: ...

    async def delete(self, response_id: str) -> bool: ...

    async def append(self, response_id: str, entries: list[LogEntry]) -> None:
        """Append entries in order (one batch, one round trip). Sequence numbers are the writer's business.

        Raises ``SequenceConflict`` (duplicate / already ended; the whole batch is refused), ``SequenceGap`` (the
        first new entry is not the log's next sequence number: appending would leave a hole), ``KeyError`` when the
        response does not exist (never created, deleted or expired), ``StoreUnavailable``.
        """
        ...

    async def read(self, response_id: str, after: int = -1, limit: int | None = None) -> list[LogEntry]:
        """Entries with ``sequence_number > after`` that exist now, oldest first."""
        ...

    def tail(self, response_id: str, after: int = -1) -> AsyncIterator[LogEntry]:
        """Every entry after ``after``, waiting for new ones, ending after the terminal entry (or when deleted)."""
        ...

    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]:
        """The stored input/output items of a conversation, oldest first; only the ``newest`` (or ``oldest``) N of
        them when given, read as such from the backing store (a page never loads the whole conversation)."""
        ...

    async def extend_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None: ...

    async def create_conversation(self, record: ConversationRecord) -> None:
        """Store a conversation object (replacing one with the same id)."""
        ...

    async def get_conversation(self, conversation_id: str) -> ConversationRecord | None: ...

    async def update_conversation(self, record: ConversationRecord) -> None:
        """Replace the object (its metadata); a no-op when it does not exist."""
        ...

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Delete the object and every item of the conversation. True when the object existed."""
        ...

    async def conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        """The item whose ``"id"`` is ``item_id`` (None: no such item), found without loading the conversation."""
        ...

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        """Delete the item whose ``"id"`` is ``item_id``. True when it existed."""
        ...

    def hold_lease(self, response_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the generation lease for ``response_id`` while the block runs (renewed in the background).

        Stores without other processes (``memory``) make this a no-op. Raises ``StoreUnavailable``.
        """
        ...

    async def recover(self, instance_id: str) -> int:
        """At startup: end every unfinished log of responses created with ``record.instance_id == instance_id``
        with the terminal ``worker_lost`` (and mark their records failed). Returns how many were ended."""
        ...

    async def expire(self, now: float | None = None) -> int:
        """Delete responses created more than ``retention_seconds`` before ``now`` (default: the clock) and
        conversations untouched for as long; also end lost logs (see leases above). Call it periodically (e.g.
        every minute). Returns how many responses were deleted."""
        ...

    async def aclose(self) -> None: ...
