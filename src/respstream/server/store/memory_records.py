"""How the memory store keeps a record: its request and Response snapshot as compact JSON bytes of exactly their
size (charged exactly, decoded by ``get``), the record itself without them (see store/memory.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.server.store.base import ResponseRecord

__all__ = ["APART", "encoded", "kept"]

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
