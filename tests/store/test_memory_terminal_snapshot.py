"""Issue 41: the memory store takes a finished response's snapshot from its terminal event's bytes.

The terminal (response.completed / incomplete / failed) already holds the Response encoded; the writer hands that
slice to :meth:`MemoryStore.update_encoded` instead of the store encoding ``record.response`` a second time. Each
case below is written twice, through the new path and through the old one (a store without ``update_encoded``, so
the writer calls ``update`` and the store encodes), and must agree byte for byte: the kept snapshot, what ``get``
returns, the log and the bytes charged. Where the terminal does not carry the Response itself (a flat ``error``
terminal, a response.failed cut to fit ``max_event_bytes``) the writer must fall back to ``update``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from respstream.server.events import dialects
from respstream.server.events.dialects import get_dialect
from respstream.server.events.writer import ResponseWriter
from respstream.server.store.base import ResponseRecord
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.store.memory import MemoryStore
from respstream.server.store.memory_budgeted import BudgetedMemoryStore
from respstream.server.store.memory_records import encoded
from respstream.server.upstream.base import Usage


class _Counting(MemoryStore):
    """The new path, counting the snapshots handed over encoded."""

    handed = 0

    async def update_encoded(self, record: ResponseRecord, response: bytes) -> None:
        self.handed += 1
        await super().update_encoded(record, response)


class _OldPath(MemoryStore):
    """The path before: no ``update_encoded``, the store encodes ``record.response`` itself."""

    update_encoded = None  # type: ignore[assignment]


class _BudgetedCounting(BudgetedMemoryStore):
    handed = 0

    async def update_encoded(self, record: ResponseRecord, response: bytes) -> None:
        self.handed += 1
        await super().update_encoded(record, response)


class _BudgetedOldPath(BudgetedMemoryStore):
    update_encoded = None  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _repeatable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Both runs of a case make the same ids and timestamps (ids are random, completed_at is the clock's)."""
    monkeypatch.setattr(dialects, "os", SimpleNamespace(urandom=_counting_bytes))
    monkeypatch.setattr("time.time", lambda: 1_800_000_000.25)
    yield


_ids = itertools.count()


def _counting_bytes(n: int) -> bytes:
    return next(_ids).to_bytes(n)


def _budget() -> ByteBudget:
    return ByteBudget(total=1 << 30, per_holder=1 << 30)


PAIRS: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "memory": (_Counting, _OldPath),
    "budgeted": (lambda: _BudgetedCounting(budget=_budget(), holder="k"),
                 lambda: _BudgetedOldPath(budget=_budget(), holder="k")),
}


def _text(w: ResponseWriter) -> None:
    for piece in ("Hel", "lo, ", "wör", "ld \"quoted\" \\ \u2028 ", "😀"):
        w.text_delta(piece)
    w.close_message()


def _completed(w: ResponseWriter) -> None:
    _text(w)
    w.complete(usage=Usage(input_tokens=12, output_tokens=7, reasoning_tokens=2, cached_tokens=1))


def _incomplete(w: ResponseWriter) -> None:
    w.text_delta("cut short")
    w.complete(incomplete_reason="max_output_tokens")


def _failed_mid_item(w: ResponseWriter) -> None:
    w.text_delta("half a sent")
    w.fail("server_error", "upstream went away")


def _failed_after_items(w: ResponseWriter) -> None:
    _text(w)
    w.fail("rate_limit_exceeded", "slow down")


def _cancelled(w: ResponseWriter) -> None:
    w.text_delta("and then")
    w.fail("cancelled", "The response was cancelled.")


def _tool_calls(w: ResponseWriter) -> None:
    w.text_delta("calling tools")
    w.close_message()
    w.client_tool_call(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    index = w.server_tool_started(call_id="call_2", name="web_search", arguments='{"query": "x"}', query="x")
    w.server_tool_finished(index, output="found it", status="completed", sources=["https://example.com/a"])
    w.client_tool_call(call_id="call_3", name="lookup", arguments="{}")
    w.complete(usage=Usage(input_tokens=3, output_tokens=4))


def _repairs(w: ResponseWriter) -> None:
    _text(w)
    w.note_repairs({"json_closed": 1})
    w.complete()


def _empty(w: ResponseWriter) -> None:
    w.complete()


CASES: dict[str, Callable[[ResponseWriter], None]] = {
    "completed": _completed, "incomplete": _incomplete, "failed_mid_item": _failed_mid_item,
    "failed_after_items": _failed_after_items, "cancelled": _cancelled, "tool_calls": _tool_calls,
    "repairs": _repairs, "empty": _empty,
}


async def _run(store: MemoryStore, dialect: str, case: Callable[[ResponseWriter], None], *, background: bool,
               max_event_bytes: int = 16 << 20) -> ResponseRecord:
    global _ids
    _ids = itertools.count()  # the same ids in both runs
    rid = "resp_0123456789"
    record = ResponseRecord(id=rid, status="in_progress", created_at=1_700_000_000.5, dialect=dialect,
                            background=background, owner="key_1", request={"input": "hi", "n": [1, 2.5, None]})
    response: dict[str, Any] = {"id": rid, "object": "response", "status": "in_progress", "output": [],
                                "created_at": 1_700_000_000, "model": "fake-model", "metadata": {"k": "v"},
                                "temperature": 0.7, "tools": [{"type": "function", "name": "get_weather"}],
                                "background": background, "instructions": None}
    record.response = response
    await store.create(record)
    writer = ResponseWriter(record, dialect=get_dialect(dialect), store=store, response=response,
                            max_event_bytes=max_event_bytes)
    writer.start()
    await writer.flush()
    case(writer)
    await writer.flush()
    return record


async def _compare(pair: str, dialect: str, case: Callable[[ResponseWriter], None], *, background: bool = False,
                   max_event_bytes: int = 16 << 20) -> tuple[Any, Any]:
    new_kind, old_kind = PAIRS[pair]
    new, old = new_kind(), old_kind()
    record = await _run(new, dialect, case, background=background, max_event_bytes=max_event_bytes)
    await _run(old, dialect, case, background=background, max_event_bytes=max_event_bytes)
    rid = record.id
    assert new._responses[rid] == old._responses[rid]  # the kept snapshot, byte for byte
    assert new._responses[rid] == encoded(msgspec.json.decode(old._responses[rid]))  # compact, as encoded() makes
    got_new, got_old = await new.get(rid), await old.get(rid)
    assert got_new == got_old and got_new is not None
    assert got_new.response["status"] == record.status != "in_progress"
    assert [(e.type, e.data) for e in await new.read(rid)] == [(e.type, e.data) for e in await old.read(rid)]
    assert new.bytes == old.bytes  # charged exactly as before
    if isinstance(new, BudgetedMemoryStore):
        assert new.budget.held("k") == old.budget.held("k") == new.bytes
    return new, got_new


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("dialect", ["openai", "openresponses"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("background", [False, True])
async def test_the_snapshot_from_the_terminal_equals_the_encoded_one(pair: str, dialect: str, case: str,
                                                                     background: bool) -> None:
    store, got = await _compare(pair, dialect, CASES[case], background=background)
    assert store.handed == 1  # the terminal's bytes were used, not a second encode
    assert got.response["background"] is background


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("case", list(CASES))
async def test_a_flat_error_terminal_falls_back_to_encoding(pair: str, case: str) -> None:
    # The platform dialect ends a failure with a flat `error` event that holds no Response.
    store, got = await _compare(pair, "platform", CASES[case])
    failing = got.response["status"] in {"failed", "cancelled"}
    assert store.handed == (0 if failing else 1)


@pytest.mark.parametrize("pair", list(PAIRS))
async def test_a_failed_terminal_cut_to_fit_falls_back_to_encoding(pair: str) -> None:
    def long_then_fail(w: ResponseWriter) -> None:
        for _ in range(6):  # each delta fits; the Response with all of them does not
            w.text_delta("x" * 500)
        w.fail("server_error", "boom")

    store, got = await _compare(pair, "openai", long_then_fail, max_event_bytes=2048)
    assert store.handed == 0  # the terminal carried a copy without output: the record keeps the whole Response
    assert got.response["output"][0]["content"][0]["text"] == "x" * 3000
    terminal = (await store.read(got.id))[-1]
    assert terminal.type == "response.failed" and msgspec.json.decode(terminal.data)["response"]["output"] == []
