"""Every bad request gets a 4xx with the error envelope, and nothing reaches the model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app


class CountingUpstream(ScriptedUpstream):
    """The scripted upstream, counting generate() calls (to prove a bad request never reached it)."""

    calls = 0

    async def generate(self, request: GenerationRequest) -> Any:
        CountingUpstream.calls += 1
        async for chunk in super().generate(request):
            yield chunk


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = make_app(upstreams={"scripted-a": CountingUpstream(4, name="a", models=["scripted-a"])},
                   max_body_bytes=4096)
    with ServerThread(app) as srv:
        yield srv.url


BAD_BODIES = [
    ({}, 400, "missing_required_parameter", "input"),
    ({"input": ""}, 400, "missing_required_parameter", "input"),
    ({"input": "   "}, 400, "missing_required_parameter", "input"),
    ({"input": []}, 400, "missing_required_parameter", "input"),
    ({"input": 5}, 400, "invalid_type", "input"),
    ({"input": "x", "model": "nope"}, 400, "model_not_found", "model"),
    ({"input": "x", "model": 3}, 400, "invalid_type", "model"),
    ({"input": "x", "stream": "yes"}, 400, "invalid_type", "stream"),
    ({"input": "x", "temperature": 9}, 400, "invalid_value", "temperature"),
    ({"input": "x", "max_output_tokens": 0}, 400, "invalid_value", "max_output_tokens"),
    ({"input": "x", "max_output_tokens": "10"}, 400, "invalid_type", "max_output_tokens"),
    ({"input": "x", "text": {"format": {"type": "json_schema"}}}, 400, "missing_required_parameter",
     "text.format.name"),
    ({"input": "x", "text": {"format": {"type": "xml"}}}, 400, "invalid_value", "text.format.type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, 400,
     "invalid_value", "input[0].content[0].image_url"),
    ({"input": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}, 400,
     "unsupported_parameter", "input[0].content[0].type"),
    ({"input": [{"role": "robot", "content": "hi"}]}, 400, "invalid_value", "input[0].role"),
    ({"input": [{"type": "function_call", "name": "f"}]}, 400, "invalid_type", "input[0].call_id"),
    ({"input": "x", "tools": [{"type": "function", "name": "calculator"}]}, 400, "invalid_value", "tools[0].name"),
    ({"input": "x", "tools": [{"type": "code_interpreter"}]}, 400, "unsupported_parameter", "tools[0].type"),
    ({"input": "x", "tools": "all"}, 400, "invalid_type", "tools"),
    ({"input": "x", "tool_choice": {"type": "function", "name": "ghost"}}, 400, "invalid_value", "tool_choice"),
    ({"input": "x", "metadata": {"k": 1}}, 400, "invalid_value", "metadata.k"),
    ({"input": "x", "background": True, "store": False}, 400, "invalid_value", "store"),
    ({"input": "x", "previous_response_id": "resp_missing"}, 400, "previous_response_not_found",
     "previous_response_id"),
    ({"input": "x", "prompt": {"id": "p"}}, 400, "unsupported_parameter", "prompt"),
    ({"input": "x", "project_id": "not-a-uuid"}, 400, "invalid_value", "project_id"),
    ([1, 2], 400, "invalid_json", None),
]


@pytest.mark.parametrize(("body", "status", "code", "param"), BAD_BODIES,
                         ids=[f"{b[2]}:{b[3]}" for b in BAD_BODIES])
def test_bad_field_is_rejected_with_envelope(url: str, body: Any, status: int, code: str, param: str | None) -> None:
    before = CountingUpstream.calls
    r = httpx.post(f"{url}/v1/responses", json=body)
    assert r.status_code == status, r.text
    payload = r.json()
    assert payload["error"]["code"] == code
    assert payload["error"]["param"] == param
    assert payload["error"]["type"] == "invalid_request_error"
    assert payload["detail"] == payload["error"]["message"]
    assert r.headers["x-request-id"]
    assert CountingUpstream.calls == before


def test_unknown_model_lists_available(url: str) -> None:
    r = httpx.post(f"{url}/v1/responses", json={"input": "x", "model": "nope"})
    assert r.json()["error"]["available"] == ["scripted-a"]
    assert "scripted-a" in r.json()["detail"]


def test_unknown_fields_are_ignored(url: str) -> None:
    r = httpx.post(f"{url}/v1/responses", json={"input": "x", "stream": False, "future_field": 1,
                                                "reasoning": {"effort": "low"}, "stream_options": {}})
    assert r.status_code == 200
    assert r.json()["status"] == "completed"


@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "invalid_json"),
        (b"", {"content-type": "application/json"}, 400, "invalid_json"),
        (b'"a string"', {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"input":"x"}', {"content-type": "text/plain"}, 415, "unsupported_media_type"),
        (b'{"input":"' + b"x" * 5000 + b'"}', {"content-type": "application/json"}, 413, "request_too_large"),
    ],
    ids=["invalid-json", "empty", "not-object", "content-type", "too-large"],
)
def test_malformed_bodies_never_500(url: str, content: bytes, headers: dict[str, str], status: int,
                                    code: str) -> None:
    r = httpx.post(f"{url}/v1/responses", content=content, headers=headers)
    assert r.status_code == status
    assert r.json()["error"]["code"] == code


def test_not_found_and_method_not_allowed_use_envelope(url: str) -> None:
    r = httpx.get(f"{url}/v1/responses/does-not-exist")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = httpx.put(f"{url}/v1/responses")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    r = httpx.get(f"{url}/nowhere")
    assert r.status_code == 404 and "error" in r.json()
