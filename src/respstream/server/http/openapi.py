"""``GET /openapi.json``: an OpenAPI 3.1 description of the gateway's HTTP API (like the seed platform publishes)."""

from __future__ import annotations

from typing import Any

from respstream.server.http.openapi_more import more_paths

__all__ = ["openapi_document"]

_ERROR = {"$ref": "#/components/schemas/ErrorEnvelope"}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): {"description": "Error", "content": {"application/json": {"schema": _ERROR}}} for c in codes}


def _response_ok(stream: bool, *, id_header: bool = False) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": {"$ref": "#/components/schemas/Response"}}}
    if stream:
        content["text/event-stream"] = {"schema": {"type": "string", "description":
                                                   "SSE frames: id: <sequence_number>, event: message|<type>, "
                                                   "data: <event JSON>; `: keep-alive` comments."}}
    ok: dict[str, Any] = {"description": "The Response (JSON) or its event stream (SSE)", "content": content}
    if id_header:
        ok["headers"] = {"x-response-id": {"description": "The new response's id, sent before any event (resume "
                                                          "or cancel even if the stream breaks inside event 0)",
                                           "schema": {"type": "string"}},
                         "x-respstream-ignored-fields": {"description": "Request fields this gateway does not know, "
                                                         "accepted and ignored (docs/compatibility.md)",
                                                         "schema": {"type": "string"}}}
    return {"200": ok}


def openapi_document(dialect: str) -> dict[str, Any]:
    id_param = {"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "respstream gateway", "version": "1",
                 "description": f"OpenAI Responses-compatible streaming gateway (dialect: {dialect})."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "ErrorEnvelope": {"type": "object", "required": ["detail", "error"], "properties": {
                    "detail": {"type": "string"},
                    "error": {"type": "object", "properties": {
                        "type": {"type": "string"}, "code": {"type": "string"}, "message": {"type": "string"},
                        "param": {"type": ["string", "null"]}}}}},
                "Response": {"type": "object", "required": ["id", "object", "created_at", "status", "model", "output"],
                             "properties": {
                                 "id": {"type": "string"}, "object": {"const": "response"},
                                 "created_at": {"type": "integer"},
                                 "status": {"enum": ["queued", "in_progress", "completed", "incomplete", "failed",
                                                     "cancelled"]},
                                 "model": {"type": "string"}, "output": {"type": "array", "items": {"type": "object"}},
                                 "output_text": {"type": "string"}, "tool_calls": {"type": "array"},
                                 "usage": {"type": ["object", "null"]}, "error": {"type": ["object", "null"]}}},
                "CreateResponse": {"type": "object", "required": ["input"], "properties": {
                    "model": {"type": "string", "default": "auto"},
                    "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
                    "stream": {"type": "boolean", "default": False, "description":
                               "Absent: JSON (platform: SSE when Accept names text/event-stream)"},
                    "background": {"type": "boolean", "default": False},
                    "store": {"type": "boolean", "default": True},
                    "instructions": {"type": ["string", "null"]},
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "tool_choice": {}, "max_output_tokens": {"type": "integer", "minimum": 1},
                    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                    "previous_response_id": {"type": ["string", "null"]},
                    "conversation_id": {"type": ["string", "null"]},
                    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                    "stream_options": {"type": "object"},
                    "context_management": {"type": "array", "items": {"type": "object", "properties": {
                        "type": {"const": "compaction"}, "compact_threshold": {"type": "integer", "minimum": 1000}}}},
                    "prompt_cache_options": {"type": "object", "properties": {
                        "ttl": {"enum": ["30m", "12h"]}, "mode": {"enum": ["implicit", "explicit"]}}}}},
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/responses": {"post": {
                "summary": "Create a response (SSE with stream: true, else the Response JSON)",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/CreateResponse"}}}},
                "responses": {**_response_ok(True, id_header=True), **_errors(400, 401, 413, 415, 429, 503)}}},
            "/v1/responses/{response_id}": {
                "get": {"summary": "Retrieve a response, or resume its stream (stream=true&starting_after=N)",
                        "parameters": [id_param,
                                       {"name": "stream", "in": "query", "schema": {"type": "boolean"}},
                                       {"name": "starting_after", "in": "query", "schema": {"type": "integer"}},
                                       {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"},
                                        "description": "With starting_after too, the larger one wins"}],
                        "responses": {**_response_ok(True), "204": {"description": "Nothing after starting_after"},
                                      **_errors(400, 401, 404, 503)}},
                "delete": {"summary": "Delete a stored response", "parameters": [id_param],
                           "responses": {"200": {"description": "Deleted"}, **_errors(401, 404, 503)}}},
            "/v1/responses/{response_id}/cancel": {"post": {
                "summary": "Cancel a running response", "parameters": [id_param],
                "responses": {**_response_ok(False), **_errors(401, 404, 503)}}},
            "/v1/models": {"get": {"summary": "List models", "responses": {"200": {"description": "Model list"}}}},
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": {"description": "OK"}}}},
            "/readyz": {"get": {"summary": "Readiness: the store and at least one upstream are healthy",
                                "security": [], "responses": {"200": {"description": "Ready, with a breakdown"},
                                                              "503": {"description": "Not ready, with a breakdown"}}}},
            "/metrics": {"get": {"summary": "Prometheus metrics (needs a key when keys are configured)",
                                 "responses": {"200": {"description": "text/plain"}, **_errors(401)}}},
            **more_paths(),
        },
    }
