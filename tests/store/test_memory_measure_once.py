"""Issue 41: the memory store measures a new record once when ``check_room`` and ``create`` see the same record.

Measuring a record walks every object of its Response (store/object_size.py), and the service asks ``check_room``
before it fetches files and ``create`` after: one walk is enough when nothing changed in between, and a fresh one is
taken whenever the record or its Response is not the one checked.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from respstream.server.store import memory
from respstream.server.store.base import ResponseRecord
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.store.memory import MemoryStore
from respstream.server.store.memory_budgeted import BudgetedMemoryStore


def _record(rid: str, words: int = 3) -> ResponseRecord:
    response = {"id": rid, "object": "response", "status": "in_progress", "output": [], "metadata": {"k": "v"},
                "tools": [{"type": "function", "name": f"tool_{i}"} for i in range(words)], "instructions": None}
    return ResponseRecord(id=rid, status="in_progress", created_at=time.time(), response=response,
                          request={"input_items": [{"type": "message", "content": "hi " * words}]})


def _stores() -> dict[str, Any]:
    return {"memory": MemoryStore,
            "budgeted": lambda: BudgetedMemoryStore(budget=ByteBudget(total=1 << 30, per_holder=1 << 30), holder="k")}


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counted: list[int] = []
    real = memory.deep_size

    def counting(value: Any) -> int:
        counted.append(1)
        return real(value)

    monkeypatch.setattr(memory, "deep_size", counting)
    return counted


def _fresh_bytes(make: Any, record: ResponseRecord) -> int:
    store = make()
    asyncio.run(store.create(record))
    return int(store.bytes)


@pytest.mark.parametrize("kind", ["memory", "budgeted"])
def test_check_then_create_of_the_same_record_measures_once(kind: str, walks: list[int]) -> None:
    make = _stores()[kind]
    expected = _fresh_bytes(make, _record("resp_a"))
    walks.clear()
    store = make()
    record = _record("resp_a")
    store.check_room(record)
    asyncio.run(store.create(record))
    assert len(walks) == 1
    assert store.bytes == expected
    assert asyncio.run(store.get("resp_a")).request == {"input_items": [{"type": "message", "content": "hi hi hi "}]}


@pytest.mark.parametrize("kind", ["memory", "budgeted"])
def test_a_replaced_response_or_another_record_is_measured_again(kind: str, walks: list[int]) -> None:
    make = _stores()[kind]
    grown = _record("resp_a", words=40)
    expected = _fresh_bytes(make, grown)
    walks.clear()
    store = make()
    record = _record("resp_a")
    store.check_room(record)
    record.response = grown.response  # not the Response that was checked: its size is taken again
    record.request = grown.request
    asyncio.run(store.create(record))
    assert len(walks) == 2
    assert store.bytes == expected

    first, second = _record("resp_b"), _record("resp_c", words=9)
    store.check_room(first)
    store.check_room(second)  # the slot holds the last one checked
    walks.clear()
    asyncio.run(store.create(first))
    asyncio.run(store.create(second))
    assert len(walks) == 2  # neither is the record the slot still held when it was created
    assert store.bytes == expected + _fresh_bytes(make, _record("resp_b")) + _fresh_bytes(make, _record("resp_c", 9))
