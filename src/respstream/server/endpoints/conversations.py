"""The Conversations API (OpenAI's shape): ``/v1/conversations`` and ``/v1/conversations/{id}/items``.

How this works: a conversation is a :class:`~respstream.server.store.base.ConversationRecord` (owner, metadata) plus
its items, the same history ``conversation_id`` / ``conversation`` on ``/v1/responses`` reads and extends (stored in
the configured store: memory, SQLite or Redis; with ``store = memory`` in the durable background store). Items are
kept normalised (text messages, function calls and their outputs, each with an id and ``status``) and listed in
OpenAI's list shape with ``order`` (default ``desc``), ``after``, ``limit`` (1-100) and ``include``. Every route
authenticates like ``/v1/responses``; another key's conversation is a 404, as an unknown one.

Routes: ``POST /v1/conversations`` (``items`` up to 20, ``metadata``), ``GET|POST|DELETE /v1/conversations/{id}``
(``POST`` replaces ``metadata``), ``GET|POST /v1/conversations/{id}/items`` (``POST``: ``items`` up to 20),
``GET|DELETE /v1/conversations/{id}/items/{item_id}`` (``DELETE`` answers the conversation).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from respstream.server.endpoints.input_items import check_include, item_page, page_window
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.body_values import check_depth
from respstream.server.inputs.conversation_records import conversation_of
from respstream.server.inputs.input_records import input_item_records
from respstream.server.inputs.requests import parse_metadata, parse_request
from respstream.server.responses.key_quota import stored_bytes
from respstream.server.store.base import ConversationRecord
from respstream.server.store.conversation_seek import conversation_after

if TYPE_CHECKING:
    from respstream.server.endpoints.gateway import Gateway

__all__ = ["MAX_ITEMS_PER_REQUEST", "conversation_routes"]

MAX_ITEMS_PER_REQUEST = 20  # OpenAI's limit for `items` on create and on adding items


def _object(record: ConversationRecord) -> dict[str, Any]:
    return {"id": record.id, "object": "conversation", "created_at": int(record.created_at),
            "metadata": record.metadata}


def _body(raw: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise HTTPError(400, "invalid_json", "the request body must be a JSON object")
    check_depth(raw)
    for key in raw:
        if key not in allowed:
            raise HTTPError(400, "unsupported_parameter", f"{key} is not a field here (known: "
                            f"{', '.join(sorted(allowed))})", param=key)
    return raw


def _items(gw: Gateway, raw: Any, *, required: bool) -> list[dict[str, Any]]:
    if raw is None and not required:
        return []
    if not isinstance(raw, list):
        raise HTTPError(400, "invalid_type" if raw is not None else "missing_required_parameter",
                        "items must be a list of input items", param="items")
    if len(raw) > MAX_ITEMS_PER_REQUEST:
        raise HTTPError(400, "invalid_value", f"items may hold at most {MAX_ITEMS_PER_REQUEST} items", param="items")
    if not raw:
        if required:
            raise HTTPError(400, "missing_required_parameter", "items must not be empty", param="items")
        return []
    try:
        parsed = parse_request({"input": raw}, server_tool_names=set()).input
    except HTTPError as exc:  # name the field as the caller sent it
        if exc.param and exc.param.startswith("input"):
            exc.param = "items" + exc.param[len("input"):]
            exc.message = exc.message.replace("input", "items", 1)
        raise
    return input_item_records(parsed, gw.svc.dialect)


class _Handlers:
    def __init__(self, gw: Gateway) -> None:
        self.gw = gw

    async def _mine(self, request: Request) -> tuple[ConversationRecord, str | None]:
        gw = self.gw
        owner = gw.authenticate(request)
        await gw.limit_rate(request, owner)
        cid = request.path_params["conversation_id"]
        return await conversation_of(gw.svc.store, cid, owner), owner

    def _charge(self, owner: str | None, items: list[dict[str, Any]]) -> None:
        """Count ``items`` against the key's store budget (429 naming it, before anything is stored)."""
        size = stored_bytes(items)
        self.gw.svc.quota.check(owner, size)
        self.gw.svc.quota.charge(owner, size)

    async def create(self, request: Request) -> Response:
        gw = self.gw
        owner = gw.authenticate(request)
        await gw.limit_rate(request, owner)
        body = _body(await gw.read_json(request), {"items", "metadata"})
        items = _items(gw, body.get("items"), required=False)
        record = ConversationRecord(id=gw.svc.dialect.new_id("conv"), created_at=time.time(), owner=owner,
                                    metadata=parse_metadata(body.get("metadata")))
        self._charge(owner, items)
        store = gw.svc.store
        await store.create_conversation(record)
        await store.extend_conversation(record.id, items)
        return JSONResponse(_object(record))

    async def retrieve(self, request: Request) -> Response:
        record, _ = await self._mine(request)
        return JSONResponse(_object(record))

    async def update(self, request: Request) -> Response:
        record, _ = await self._mine(request)
        body = _body(await self.gw.read_json(request), {"metadata"})
        if "metadata" not in body:
            raise HTTPError(400, "missing_required_parameter", "metadata is required", param="metadata")
        record.metadata = parse_metadata(body["metadata"])
        await self.gw.svc.store.update_conversation(record)
        return JSONResponse(_object(record))

    async def delete(self, request: Request) -> Response:
        record, _ = await self._mine(request)
        await self.gw.svc.store.delete_conversation(record.id)
        return JSONResponse({"id": record.id, "object": "conversation.deleted", "deleted": True})

    async def list_items(self, request: Request) -> Response:
        record, _ = await self._mine(request)
        page = page_window(request)
        if page is None:  # a bad order: item_page says what is wrong, before anything is read
            return JSONResponse(item_page([], request, f"conversation '{record.id}'"))
        items = await self._page_items(record.id, *page)
        if items is None:  # legacy id-less items get ids from their position: read them all
            items = _with_ids(await self.gw.svc.store.conversation(record.id), record.id)
        return JSONResponse(item_page(items, request, f"conversation '{record.id}'"))

    async def _page_items(self, cid: str, order: str, want: int, after: str | None) -> list[dict[str, Any]] | None:
        """What one page needs and nothing more: the ``want`` items at the end its order starts from, or the cursor
        and ``want`` items past it, found by seeking to the cursor in the store (store/conversation_seek.py). None
        when the page has an item without id (stored before items had ids: see :func:`_with_ids`)."""
        store = self.gw.svc.store
        if after is None:
            items = await (store.conversation(cid, newest=want) if order == "desc" else
                           store.conversation(cid, oldest=want))
        else:
            found = await conversation_after(store, cid, after, count=want, newer=order == "asc")
            if found is None:
                if after.startswith(f"item_{cid}_") and await self._has_legacy_items(cid):
                    return None  # a position id of an id-less item: only the whole history knows positions
                return []  # item_page answers 404 naming the cursor
            items = found
        return items if all("id" in item for item in items) else None

    async def _has_legacy_items(self, cid: str) -> bool:
        """Items without ids are the oldest ones (from before items had ids): the first item tells."""
        first = await self.gw.svc.store.conversation(cid, oldest=1)
        return bool(first) and "id" not in first[0]

    async def add_items(self, request: Request) -> Response:
        record, _ = await self._mine(request)
        check_include(request)
        body = _body(await self.gw.read_json(request), {"items"})
        items = _items(self.gw, body.get("items"), required=True)
        self._charge(record.owner, items)
        await self.gw.svc.store.extend_conversation(record.id, items)
        return JSONResponse({"object": "list", "data": items, "first_id": items[0]["id"],
                             "last_id": items[-1]["id"], "has_more": False})

    async def _item(self, request: Request) -> tuple[ConversationRecord, dict[str, Any]]:
        record, _ = await self._mine(request)
        item_id = request.path_params["item_id"]
        store = self.gw.svc.store
        if not item_id.startswith(f"item_{record.id}_"):  # a stored id: looked up in the store alone
            found = await store.conversation_item(record.id, item_id)
            if found is not None:
                return record, found
        elif await self._has_legacy_items(record.id):  # id-less items have ids from their position: read them all
            for item in _with_ids(await store.conversation(record.id), record.id):
                if item.get("id") == item_id:
                    return record, item
        raise HTTPError(404, "not_found", f"Item with id '{item_id[:120]}' not found in conversation "
                        f"'{record.id}'.", param="item_id")

    async def retrieve_item(self, request: Request) -> Response:
        check_include(request)
        _, item = await self._item(request)
        return JSONResponse(item)

    async def delete_item(self, request: Request) -> Response:
        record, item = await self._item(request)
        await self.gw.svc.store.delete_conversation_item(record.id, item["id"])
        return JSONResponse(_object(record))


def _with_ids(items: list[dict[str, Any]], conversation_id: str) -> list[dict[str, Any]]:
    """Items stored before items had ids get a stable one from their position (they cannot be deleted by it)."""
    return [item if "id" in item else {"id": f"item_{conversation_id}_{i}", **item} for i, item in enumerate(items)]


def conversation_routes(gw: Gateway) -> list[Route]:
    h = _Handlers(gw)
    base = "/v1/conversations"
    return [
        Route(base, h.create, methods=["POST"]),
        Route(base + "/{conversation_id}", h.retrieve, methods=["GET"]),
        Route(base + "/{conversation_id}", h.update, methods=["POST"]),
        Route(base + "/{conversation_id}", h.delete, methods=["DELETE"]),
        Route(base + "/{conversation_id}/items", h.list_items, methods=["GET"]),
        Route(base + "/{conversation_id}/items", h.add_items, methods=["POST"]),
        Route(base + "/{conversation_id}/items/{item_id}", h.retrieve_item, methods=["GET"]),
        Route(base + "/{conversation_id}/items/{item_id}", h.delete_item, methods=["DELETE"]),
    ]
