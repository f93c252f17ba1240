"""OpenAPI paths of the endpoints beside create/retrieve (compact, input items, input tokens, Conversations) and the
WebSocket mode note. Merged into ``openapi.openapi_document``."""

from __future__ import annotations

from typing import Any

__all__ = ["more_paths"]


def _ok(summary: str, **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": {"200": {"description": "OK"}, "400": {"description": "Bad request"},
                                              "401": {"description": "Missing or invalid API key"},
                                              "404": {"description": "Not found (or another key's)"}}, **extra}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


_LIST = [{"name": n, "in": "query", "schema": s} for n, s in (
    ("order", {"type": "string", "enum": ["asc", "desc"], "default": "desc"}),
    ("after", {"type": "string"}), ("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
    ("include", {"type": "array", "items": {"type": "string"}}))]


def more_paths() -> dict[str, Any]:
    conv, item = _path("conversation_id"), _path("item_id")
    return {
        "/v1/responses/compact": {"post": _ok("Compact a conversation into a compaction item (CompactResource)")},
        "/v1/responses/input_tokens": {"post": _ok(
            "Count the input tokens of a create body (tokenizer where the upstream has one, else estimated: true)")},
        "/v1/responses/{response_id}/input_items": {"get": _ok("List a response's input items",
                                                                parameters=[_path("response_id"), *_LIST])},
        "/v1/conversations": {"post": _ok("Create a conversation (items up to 20, metadata)")},
        "/v1/conversations/{conversation_id}": {
            "get": _ok("Retrieve a conversation", parameters=[conv]),
            "post": _ok("Update a conversation's metadata", parameters=[conv]),
            "delete": _ok("Delete a conversation and its items", parameters=[conv])},
        "/v1/conversations/{conversation_id}/items": {
            "get": _ok("List a conversation's items", parameters=[conv, *_LIST]),
            "post": _ok("Add items (up to 20)", parameters=[conv])},
        "/v1/conversations/{conversation_id}/items/{item_id}": {
            "get": _ok("Retrieve an item", parameters=[conv, item]),
            "delete": _ok("Delete an item (answers the conversation)", parameters=[conv, item])},
    }
