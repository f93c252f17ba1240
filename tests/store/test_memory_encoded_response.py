"""Issue 41: the memory store keeps a record's Response snapshot as compact JSON bytes, like its request.

Before, the Response was the writer's live dict, measured object by object (store/object_size.py) at every create,
check_room and update: ~100 objects walked three times a response, ~20% of a short streaming request's
instructions. Now it is encoded once per create or update (its charge exact), and :meth:`get` decodes a copy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from typing import Any

import msgspec
import pytest

from respstream.server.store import memory_records
from respstream.server.store.base import ResponseRecord
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.store.memory import MemoryStore
from respstream.server.store.memory_budgeted import BudgetedMemoryStore


def _record(rid: str, tools: int = 3) -> ResponseRecord:
    response = {"id": rid, "object": "response", "status": "in_progress", "output": [], "metadata": {"k": "v"},
                "tools": [{"type": "function", "name": f"tool_{i}"} for i in range(tools)], "instructions": None,
                "temperature": 0.7, "created_at": 1796597822837}
    return ResponseRecord(id=rid, status="in_progress", created_at=time.time(), response=response,
                          request={"input_items": [{"type": "message", "content": "hi"}]})


STORES: dict[str, Any] = {
    "memory": MemoryStore,
    "budgeted": lambda: BudgetedMemoryStore(budget=ByteBudget(total=1 << 30, per_holder=1 << 30), holder="k"),
}


@pytest.mark.parametrize("kind", list(STORES))
def test_the_response_is_kept_as_its_json_and_charged_its_bytes(kind: str) -> None:
    store = STORES[kind]()
    small, large = _record("resp_a", tools=1), _record("resp_b", tools=200)
    asyncio.run(store.create(small))
    one = store.bytes
    asyncio.run(store.create(large))
    grown = len(msgspec.json.encode(large.response)) - len(msgspec.json.encode(small.response))
    assert store.bytes - 2 * one == grown + sys.getsizeof(large.id) - sys.getsizeof(small.id)  # a byte a byte
    got = asyncio.run(store.get("resp_b"))
    assert got is not None and got.response == large.response and got.response is not large.response


@pytest.mark.parametrize("kind", list(STORES))
def test_a_change_to_the_callers_dict_is_stored_by_update(kind: str) -> None:
    store = STORES[kind]()
    record = _record("resp_a")
    asyncio.run(store.create(record))
    before = store.bytes
    record.response["output"] = [{"type": "message", "id": "msg_1", "content": [{"type": "output_text",
                                                                                "text": "x" * 500}]}]
    record.response["status"] = record.status = "completed"
    seen = asyncio.run(store.get("resp_a"))
    assert seen is not None and seen.response["output"] == [] and seen.response["status"] == "in_progress"
    asyncio.run(store.update(record))
    final = asyncio.run(store.get("resp_a"))
    assert final is not None and final.response == record.response and final.status == "completed"
    assert store.bytes - before == len(msgspec.json.encode(record.response)) - len(msgspec.json.encode(
        seen.response))
    assert asyncio.run(store.delete("resp_a")) and store.bytes == 0


def test_the_kept_record_copies_every_other_field() -> None:
    values: dict[str, Any] = {"id": "resp_k", "status": "queued", "created_at": 12.5, "background": True,
                              "dialect": "openai", "owner": "owner-hash", "instance_id": "i-1",
                              "response": {"r": 1}, "request": {"q": 2}, "conversation_id": "conv_1"}
    assert set(values) == {f.name for f in dataclasses.fields(ResponseRecord)}  # a new field: add it here
    record = ResponseRecord(**values)
    assert memory_records.kept(record) == dataclasses.replace(record, request=memory_records.APART,
                                                              response=memory_records.APART)
