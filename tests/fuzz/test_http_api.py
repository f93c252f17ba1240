"""Bad input against the HTTP API, over loopback: property-based requests built from ``/openapi.json`` (hypothesis),
plus the hand-picked nasties (oversized bodies and headers, invalid UTF-8, deep nesting, huge arrays, unknown content
types, path and id injection, foreign ids with API keys).

Properties: never a 5xx; every 4xx carries ``{"detail", "error": {"type", "code", "message", "param"}}``; a 200 stream
is protocol-valid.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faults.helpers import check

# RESPSTREAM_FUZZ_EXAMPLES=2000 for a longer local run; the committed default keeps the suite fast.
EXAMPLES = int(os.environ.get("RESPSTREAM_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(
    max_size=40)
JSON = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=10), inner, max_size=4), max_leaves=12)


def assert_envelope(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400:
        body = response.json()
        assert set(body) >= {"detail", "error"}, body
        assert set(body["error"]) >= {"type", "code", "message", "param"}, body
        assert isinstance(body["detail"], str) and body["detail"]
        assert isinstance(body["error"]["code"], str) and body["error"]["code"]
        assert "x-request-id" in response.headers


def assert_ok(response: httpx.Response) -> None:
    assert_envelope(response)
    if response.status_code == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
        core = check(response.content)
        assert core.violations == []
        assert core.result.status != "truncated"


@pytest.fixture(scope="module")
def spec(open_gateway: tuple[str, httpx.Client]) -> dict[str, Any]:
    _, client = open_gateway
    document = client.get("/openapi.json").json()
    assert "/v1/responses" in document["paths"]
    return document


def _body_strategy(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Objects over the CreateResponse properties: each value well-typed or arbitrary JSON, plus unknown keys."""
    schema = spec["components"]["schemas"]["CreateResponse"]
    typed: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=30), "boolean": st.booleans(), "integer": st.integers(-5, 10**6),
        "number": st.floats(-1, 3, allow_nan=False), "object": st.dictionaries(st.text(max_size=8), JSON_SCALARS,
                                                                                max_size=3),
        "array": st.lists(st.dictionaries(st.sampled_from(["type", "role", "content", "name", "text"]), JSON,
                                          max_size=3), max_size=3),
        "null": st.none(),
    }

    def for_schema(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
        kinds = prop.get("type")
        options = [s["type"] for s in prop.get("oneOf", []) if "type" in s]
        names = options or ([kinds] if isinstance(kinds, str) else list(kinds or []))
        strategies = [typed[n] for n in names if n in typed]
        if "enum" in prop:
            strategies.append(st.sampled_from(prop["enum"]))
        return st.one_of(*strategies, JSON) if strategies else JSON

    fields = {name: for_schema(prop) for name, prop in schema["properties"].items()}
    # ``stream: false`` would wait for each generation; the scripted backend is instant, so both are fine
    return st.fixed_dictionaries({}, optional={**fields, "unknown_field": JSON}) | JSON


@pytest.mark.parametrize(("key", "value"), [("type", ["message"]), ("type", {"a": 1}), ("role", []), ("role", 3)])
def test_input_item_with_a_non_string_type_is_a_400(open_gateway: tuple[str, httpx.Client], key: str,
                                                    value: Any) -> None:
    _, client = open_gateway
    item = {"type": "message", "role": "user", "content": "hi", key: value}
    response = client.post("/v1/responses", json={"input": [item]})
    assert response.status_code == 400
    assert_envelope(response)
    assert response.json()["error"]["param"] == f"input[0].{key}"
    assert response.json()["error"]["code"] == "invalid_type"


def test_tool_with_a_non_string_type_is_a_400(open_gateway: tuple[str, httpx.Client]) -> None:
    _, client = open_gateway
    response = client.post("/v1/responses", json={"input": "hi", "tools": [{"type": []}]})
    assert response.status_code == 400
    assert_envelope(response)
    assert response.json()["error"]["param"] == "tools[0].type"


@pytest.mark.parametrize(("body", "param"), [
    ({"input": [{"role": "user", "content": [{"type": ["input_text"], "text": "hi"}]}]}, "input[0].content[0].type"),
    ({"input": "hi", "tool_choice": {"type": {"function": 1}}}, "tool_choice.type"),
    ({"input": "hi", "tool_choice": {"type": "function", "name": ["f"]}}, "tool_choice"),
    ({"input": "hi", "tool_choice": ["auto"]}, "tool_choice"),
    ({"input": "hi", "text": {"format": {"type": ["json_schema"]}}}, "text.format.type"),
    ({"input": "hi", "instructions": [{"type": []}]}, "instructions[0].type"),
    ({"input": "hi", "tools": [{"name": "f"}]}, "tools[0].type"),
])
def test_non_string_discriminators_elsewhere_are_400_naming_the_field(open_gateway: tuple[str, httpx.Client],
                                                                      body: dict[str, Any], param: str) -> None:
    _, client = open_gateway
    response = client.post("/v1/responses", json=body)
    assert response.status_code == 400, response.text[:300]
    assert_envelope(response)
    assert response.json()["error"]["param"] == param


@pytest.mark.slow
def test_create_from_openapi_never_5xx_and_always_enveloped(
    open_gateway: tuple[str, httpx.Client], spec: dict[str, Any]
) -> None:
    _, client = open_gateway

    @FUZZ
    @given(body=_body_strategy(spec))
    def run(body: Any) -> None:
        assert_ok(client.post("/v1/responses", content=json.dumps(body).encode(),
                              headers={"content-type": "application/json"}))

    run()


def _shaped_body() -> st.SearchStrategy[dict[str, Any]]:
    """Bodies that look almost right: real item/part/tool type names with each field valid or arbitrary JSON, so
    the values reach the deeper validation branches (a plain JSON strategy rarely gets past the first check)."""
    anything = JSON | st.text(max_size=8)
    part = st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text", "text", "refusal",
                                                           "input_image", "bogus"]) | anything},
                                 optional={"text": st.text(max_size=8) | anything, "refusal": anything})
    content = st.text(max_size=8) | st.lists(part | anything, max_size=3) | anything
    item = st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "mcp_call",
                                 "item_reference", "bogus"]) | anything,
        "role": st.sampled_from(["user", "assistant", "system", "developer", "tool"]) | anything,
        "content": content, "call_id": st.text(max_size=6) | anything, "name": st.text(max_size=6) | anything,
        "arguments": st.just("{}") | anything, "output": content, "id": anything})
    tool = st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["function", "web_search", "web_search_preview", "calculator", "file_search",
                                 "bogus"]) | anything,
        "name": st.sampled_from(["f", "g", "calculator"]) | anything, "parameters": anything,
        "description": anything, "strict": anything})
    choice = st.sampled_from(["auto", "none", "required", "bogus"]) | st.fixed_dictionaries(
        {}, optional={"type": st.sampled_from(["function", "web_search"]) | anything,
                      "name": st.sampled_from(["f", "g"]) | anything}) | anything
    return st.fixed_dictionaries({"input": st.text(max_size=8) | st.lists(item | anything, max_size=4)}, optional={
        "tools": st.lists(tool | anything, max_size=3) | anything, "tool_choice": choice,
        "instructions": st.text(max_size=8) | st.lists(item, max_size=2) | anything,
        "text": st.fixed_dictionaries({}, optional={"format": st.fixed_dictionaries(
            {}, optional={"type": st.sampled_from(["text", "json_schema"]) | anything}) | anything}) | anything,
        "conversation": st.text(max_size=6) | st.fixed_dictionaries({"id": anything}) | anything,
        "metadata": st.dictionaries(st.text(max_size=70), st.text(max_size=4) | anything, max_size=3) | anything,
        "model": st.sampled_from(["auto", "scripted", "nope"]) | anything,
        "stream": st.booleans() | anything, "background": st.booleans(), "store": st.booleans() | anything,
        "previous_response_id": st.text(max_size=6) | anything, "max_output_tokens": anything,
        "temperature": anything, "project_id": anything, "stream_options": anything,
    })


@pytest.mark.slow
def test_almost_valid_bodies_never_5xx(open_gateway: tuple[str, httpx.Client]) -> None:
    _, client = open_gateway

    @FUZZ
    @given(body=_shaped_body())
    def run(body: dict[str, Any]) -> None:
        assert_ok(client.post("/v1/responses", content=json.dumps(body).encode(),
                              headers={"content-type": "application/json"}))

    run()


@pytest.mark.slow
def test_every_documented_path_with_arbitrary_ids(open_gateway: tuple[str, httpx.Client], spec: dict[str, Any]) -> None:
    _, client = open_gateway
    operations = [(path, method.upper()) for path, item in spec["paths"].items() for method in item
                  if method in ("get", "post", "delete")]
    assert ("/v1/responses/{response_id}", "GET") in operations

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(op=st.sampled_from(operations), rid=st.text(min_size=1, max_size=80),
           query=st.dictionaries(st.sampled_from(["stream", "starting_after", "x"]), st.text(max_size=12), max_size=3))
    def run(op: tuple[str, str], rid: str, query: dict[str, str]) -> None:
        path, method = op
        url = re.sub(r"\{[a-z_]+\}", lambda _: quote(rid, safe=""), path)  # every path parameter
        response = client.request(method, url, params=query, json={"input": "x"} if method == "POST" else None)
        assert_ok(response)

    run()


@pytest.mark.parametrize(
    ("content", "ctype", "status", "code"),
    [
        (b"x" * (64 * 1024 + 1), "application/json", 413, "request_too_large"),
        (b'{"input": "\xff\xfe bad utf-8"}', "application/json", 400, "invalid_json"),
        (b"[" * 5000 + b"]" * 5000, "application/json", 400, "invalid_json"),
        (b'{"input": "hi"}', "text/plain", 415, "unsupported_media_type"),
        (b'{"input": "hi"}', "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        (b"", "application/json", 400, "invalid_json"),
        (b"null", "application/json", 400, None),
        (b'{"input": ' + b"[" * 3000 + b"]" * 3000 + b"}", "application/json", 400, "invalid_json"),
        # Decodes fine, but deeper than body_values.MAX_JSON_DEPTH: refused before any encoder has to recurse.
        (b'{"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": ' + b'{"a": ' * 200 + b"1"
         + b"}" * 200 + b"}]}", "application/json", 400, "invalid_json"),
    ],
    ids=["oversized", "invalid-utf8", "deep-array", "text-plain", "form", "empty", "null", "deep-input",
         "deep-tool-schema"],
)
def test_bad_bodies(open_gateway: tuple[str, httpx.Client], content: bytes, ctype: str, status: int,
                    code: str | None) -> None:
    _, client = open_gateway
    response = client.post("/v1/responses", content=content, headers={"content-type": ctype})
    assert_envelope(response)
    assert response.status_code == status, response.text[:300]
    if code is not None:
        assert response.json()["error"]["code"] == code


def test_oversized_body_without_content_length_is_413(open_gateway: tuple[str, httpx.Client]) -> None:
    _, client = open_gateway

    def chunks() -> Any:
        for _ in range(80):
            yield b" " * 1024  # chunked upload: the limit is enforced while reading, not from the header

    response = client.post("/v1/responses", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert_envelope(response)


def test_huge_input_array_is_rejected_or_streams_cleanly(open_gateway: tuple[str, httpx.Client]) -> None:
    _, client = open_gateway
    items = [{"type": "message", "role": "user", "content": "hi"}] * 2000  # ~110 KB: over the 64 KiB limit
    assert_ok(response := client.post("/v1/responses", json={"input": items}))
    assert response.status_code == 413
    small = [{"type": "message", "role": "user", "content": "hi"}] * 500  # under it: must stream cleanly
    response = client.post("/v1/responses", json={"input": small})
    assert response.status_code == 200
    assert_ok(response)


def test_oversized_header_is_rejected_without_5xx(open_gateway: tuple[str, httpx.Client]) -> None:
    _, client = open_gateway
    try:
        response = client.post("/v1/responses", json={"input": "hi"}, headers={"x-big": "a" * 200_000})
    except httpx.RemoteProtocolError:
        return  # the HTTP layer closed the connection: refused before the app, which is fine
    assert response.status_code < 500 or response.status_code == 431


@pytest.mark.parametrize("rid", ["../healthz", "..%2F..%2Fmetrics", "%00", "abc%00def", "a" * 5000, "%2e%2e",
                                 "' OR 1=1 --", "<script>", "%ff%fe"])
def test_path_injection_on_response_id_is_404(open_gateway: tuple[str, httpx.Client], rid: str) -> None:
    url, _ = open_gateway
    for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/cancel"), ("GET", "?stream=true")):
        with httpx.Client(timeout=10) as raw_client:
            response = raw_client.request(method, httpx.URL(f"{url}/v1/responses/{rid}{suffix}"))
        assert_envelope(response)
        assert response.status_code in (404, 405, 414), (method, rid, response.status_code)


def test_foreign_and_missing_ids_are_both_404_with_api_keys(keyed_gateway: dict[str, Any]) -> None:
    client: httpx.Client = keyed_gateway["client"]
    alice = {"authorization": f"Bearer {keyed_gateway['alice']}"}
    bob = {"authorization": f"Bearer {keyed_gateway['bob']}"}
    created = client.post("/v1/responses", json={"input": "hi", "stream": False}, headers=alice)
    assert created.status_code == 200
    rid = created.json()["id"]
    assert client.get(f"/v1/responses/{rid}", headers=alice).status_code == 200
    foreign, missing = [], []
    for method, suffix in (("GET", ""), ("GET", "?stream=true"), ("POST", "/cancel"), ("DELETE", "")):
        foreign.append(client.request(method, f"/v1/responses/{rid}{suffix}", headers=bob))
        missing.append(client.request(method, f"/v1/responses/{rid[:-4]}beef{suffix}", headers=bob))
    for a, b in zip(foreign, missing, strict=True):
        assert a.status_code == b.status_code == 404
        assert_envelope(a)
        assert a.json()["error"]["code"] == b.json()["error"]["code"] == "not_found"
        assert rid not in a.text.replace(f"'{rid}'", "")  # nothing beyond the id the caller sent
    assert client.get(f"/v1/responses/{rid}").status_code == 401
    assert client.get(f"/v1/responses/{rid}", headers=alice).status_code == 200, "bob's DELETE must not reach it"
