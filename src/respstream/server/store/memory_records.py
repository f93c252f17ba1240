"""How the memory store keeps a record: its request and Response snapshot as compact JSON bytes of exactly their
size (charged exactly, decoded by ``get``), the record itself without them, and what its log entries take (see
store/memory.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from respstream.server.store.base import Entry, LogEntry, ResponseRecord
from respstream.server.store.object_size import DELTA_ENTRY_BYTES, LOG_ENTRY_BYTES

__all__ = ["APART", "encoded", "entry_bytes", "kept"]

# An entry besides its payload's bytes: the struct, its list slot and the bytes object's header.
_LOG_ENTRY = LOG_ENTRY_BYTES + sys.getsizeof(b"")
_DELTA_ENTRY = DELTA_ENTRY_BYTES + sys.getsizeof(b"")

APART: dict[str, Any] = {}  # a kept record's ``request`` and ``response``: they are kept encoded, apart


def encoded(value: dict[str, Any]) -> bytes:
    """Compact JSON in a bytes object of exactly its size (the encoder's own buffer is over-allocated by up to half,
    and ``getsizeof`` would not show it)."""
    return bytes(memoryview(msgspec.json.encode(value)))


def kept(record: ResponseRecord) -> ResponseRecord:
    """A copy of ``record`` without its request and Response. (``dataclasses.replace`` looks the fields up on every
    call, twice a response; tests/store/test_memory_encoded_response.py checks that every field is here.)"""
    return ResponseRecord(id=record.id, status=record.status, created_at=record.created_at,
                          background=record.background, dialect=record.dialect, owner=record.owner,
                          instance_id=record.instance_id, response=APART, request=APART,
                          conversation_id=record.conversation_id)


def entry_bytes(entries: Sequence[Entry]) -> int:
    """What appended log entries take in the store: each entry's overhead and its payload."""
    total = 0
    for e in entries:
        if e.__class__ is LogEntry:
            total += _LOG_ENTRY + len(e.data)
        else:  # the delta's JSON string as the encoder made it: a buffer of at least 32 bytes, grown by half
            grown = 3 * len(e.piece) // 2  # type: ignore[union-attr]
            total += _DELTA_ENTRY + (grown if grown > 32 else 32)  # (max() is a call a delta: this is per event)
    return total
