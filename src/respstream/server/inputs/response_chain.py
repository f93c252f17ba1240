"""The history a ``previous_response_id`` brings, rebuilt from a chain of small records.

How this works: a stored response keeps only its own turn — ``request["input_items"]`` (its input), its
``response["output"]`` and, when it read a conversation, ``request["base"]`` (the conversation items it saw) — plus
``request["parent"]``, the id of its previous response. It never copies its context (before, every record of a
chain stored the whole context again: a 121-byte request could add 36 MB). :func:`chain_items` walks the parents
from the newest back, collecting turns until it has the ``conversation_window`` items the model may see, the chain
ends (no parent, an ancestor deleted or expired), or a budget of ``[limits]`` is spent: ``history_max_depth``
records read or ``history_max_bytes`` of items collected (older items are then left out, as the window would).
Records written before this change carry ``request["context"]`` (their whole context): the walk stops there and
uses it. A stored response whose parent is ``store: false`` (deleted once its client has it, or kept on one
WebSocket only) keeps that history in its ``base`` instead of a parent reference (see
:func:`~respstream.server.inputs.response_inputs.context_and_base`); a stored parent that is deleted or expires ends its
children's history there.
"""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.server import request_limits
from respstream.server.inputs.history import items_from_json, output_to_items
from respstream.server.inputs.history_refs import base_size, resolve_base
from respstream.server.inputs.response_request import InputItem
from respstream.server.store.base import ResponseRecord, Store

__all__ = ["chain_items", "find_record", "record_request", "unstored_turns"]


async def find_record(store: Store, rid: str, owner: str | None, local: Store | None) -> ResponseRecord | None:
    """The record ``rid`` as the caller may see it: the connection-local store first (WebSocket), else the store,
    where a ``store: false`` response is not found for a connection that has its own cache; None otherwise."""
    record = await local.get(rid) if local is not None else None
    if record is None:
        record = await store.get(rid)
        if record is not None and local is not None and record.request.get("store") is False:
            record = None  # a store:false response lives only on the socket that made it
    return record if record is not None and record.owner == owner else None


async def _turn(store: Store, record: ResponseRecord) -> list[dict[str, Any]]:
    """The items one record adds to the history before its output, as stored JSON: its base (conversation windows
    read back: inputs/history_refs.py) and input, or a legacy record's whole context."""
    request = record.request
    if "context" in request:  # a legacy record: its whole context, its own input included
        return list(request["context"])
    return [*(await resolve_base(store, request.get("base") or [])), *(request.get("input_items") or [])]


async def chain_items(store: Store, newest: ResponseRecord, owner: str | None, local: Store | None,
                      *, window: int) -> list[InputItem]:
    """The history ending with ``newest`` (its input and output last): at least ``window`` items when the chain
    has them, within the ``[limits]`` depth and byte budgets."""
    limits = request_limits.current()
    turns: list[list[InputItem]] = []  # newest first
    count = size = 0
    record: ResponseRecord | None = newest
    for _depth in range(limits.history_max_depth):
        if record is None:
            break
        stored = await _turn(store, record)
        size += len(msgspec.json.encode(stored))
        if size > limits.history_max_bytes and turns:
            break  # older turns would pass the byte budget: the history starts after them
        items = items_from_json(stored) + output_to_items(record.response.get("output", []))
        turns.append(items)
        count += len(items)
        parent = record.request.get("parent")
        if count >= window or "context" in record.request or not isinstance(parent, str):
            break
        record = await find_record(store, parent, owner, local)
    return [item for turn in reversed(turns) for item in turn]


def record_request(*, parent: str | None, base: list[dict[str, Any]], store: bool | None,
                   input_items: list[dict[str, Any]]) -> dict[str, Any]:
    """``record.request`` for a new response: a reference to its parent and its own turn, never its context;
    ``base`` as :func:`~respstream.server.inputs.response_inputs.context_and_base` gives it (references to
    conversation windows, and the turns of ``store: false`` parents)."""
    request: dict[str, Any] = {"store": store, "input_items": input_items}
    if parent is not None:
        request["parent"] = parent
    if base:
        request["base"] = base
    return request


async def unstored_turns(store: Store, newest: ResponseRecord, owner: str | None, local: Store | None,
                         *, window: int) -> tuple[list[dict[str, Any]], str | None]:
    """For a stored child of the ``store: false`` response ``newest``: the turns of its ``store: false`` ancestors
    (which are deleted, or live on one socket) as base elements, oldest first, and the stored ancestor the child can
    refer to for the rest (None: the window was filled first, or the chain ends). Each turn keeps its conversation
    references as references: only the ``store: false`` turns' own input and output are copied."""
    turns: list[list[dict[str, Any]]] = []
    count = 0
    record: ResponseRecord | None = newest
    for _depth in range(request_limits.current().history_max_depth):
        if record is None or record.request.get("store") is not False:
            break
        request = record.request
        output = [item.to_json() for item in output_to_items(record.response.get("output", []))]
        if "context" in request:  # a legacy record: its whole context, and nothing before it
            turns.append([*request["context"], *output])
            return [e for turn in reversed(turns) for e in turn], None
        turn = [*(request.get("base") or []), *(request.get("input_items") or []), *output]
        turns.append(turn)
        count += base_size(turn)
        parent = request.get("parent")
        if count >= window or not isinstance(parent, str):
            return [e for turn in reversed(turns) for e in turn], None
        record = await find_record(store, parent, owner, local)
    stored = record is not None and record.request.get("store") is not False
    return [e for turn in reversed(turns) for e in turn], record.id if stored and record is not None else None
