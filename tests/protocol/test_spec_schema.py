"""protocol/spec_schema.py mirrors the Open Responses OpenAPI file (vendored in openresponses_spec/, Apache-2.0):
same schemas, same fields, same required-ness, same nullability, same discriminators; and its validators accept
the spec's own example and refuse what the spec forbids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from respstream.protocol import spec_schema
from respstream.protocol.spec_schema import SCHEMAS, SPEC_EVENT_TYPES, event_problems, response_problems

SPEC = json.loads((Path(__file__).parent / "openresponses_spec" / "openapi-2026-04-24.json").read_text())
COMPONENTS: dict[str, Any] = SPEC["components"]["schemas"]


def _nullable(prop: dict[str, Any]) -> bool:
    return any(alt.get("type") == "null" for alt in prop.get("anyOf", []))


def _struct_fields(cls: type[msgspec.Struct]) -> dict[str, msgspec.inspect.Field]:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    return {f.encode_name: f for f in info.fields}


def _has_none(t: msgspec.inspect.Type) -> bool:
    if isinstance(t, msgspec.inspect.NoneType):
        return True
    return isinstance(t, msgspec.inspect.UnionType) and any(isinstance(x, msgspec.inspect.NoneType) for x in t.types)


def test_the_vendored_file_is_the_spec_version_mirrored() -> None:
    assert spec_schema.SPEC_VERSION in (Path(__file__).parent / "openresponses_spec" / "NOTICE").read_text()
    assert (Path(__file__).parent / "openresponses_spec" / "LICENSE").read_text().lstrip().startswith("Apache")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_struct_mirrors_its_schema(name: str) -> None:
    assert name in COMPONENTS, f"{name} is not a schema of the spec"
    schema, cls = COMPONENTS[name], SCHEMAS[name]
    props: dict[str, Any] = schema["properties"]
    required = set(schema.get("required", []))
    fields = _struct_fields(cls)
    tag_field = cls.__struct_config__.tag_field
    if tag_field is not None:  # a discriminated member: its tag is the schema's one-value `type` enum
        assert props["type"]["enum"] == [cls.__struct_config__.tag]
        props = {k: v for k, v in props.items() if k != "type"}
        required.discard("type")
    assert set(fields) == set(props), f"{name}: fields differ from the spec's properties"
    for field_name, field in fields.items():
        assert field.required == (field_name in required), f"{name}.{field_name}: required-ness differs"
        if field_name in required and not (name == "ResponseResource" and field_name == "metadata"):
            assert _has_none(field.type) == _nullable(props[field_name]), f"{name}.{field_name}: nullability"


def test_every_streaming_event_of_the_spec_is_mirrored() -> None:
    stream = SPEC["paths"]["/responses"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    spec_events = {COMPONENTS[ref["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["enum"][0]
                   for ref in stream["oneOf"]}
    assert spec_events == SPEC_EVENT_TYPES


def test_every_response_field_is_required_by_the_spec_and_mirrored() -> None:
    assert set(COMPONENTS["ResponseResource"]["required"]) == set(_struct_fields(SCHEMAS["ResponseResource"]))


# --- the validators ----------------------------------------------------------------------------------------------

GOOD: dict[str, Any] = {
    "id": "resp_1", "object": "response", "created_at": 1764967971, "completed_at": 1764967972,
    "status": "completed", "incomplete_details": None, "model": "m", "previous_response_id": None,
    "instructions": None, "error": None, "tools": [
        {"type": "function", "name": "f", "description": None, "parameters": {"type": "object"}, "strict": True}],
    "output": [{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "phase": "final_answer",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
               {"id": "rs_1", "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
               {"id": "fc_1", "type": "function_call", "call_id": "c", "name": "f", "arguments": "{}",
                "status": "completed"}],
    "tool_choice": "auto", "truncation": "disabled", "parallel_tool_calls": True, "text": {"format": {"type": "text"}},
    "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0, "top_logprobs": 0, "temperature": 1,
    "reasoning": {"effort": None, "summary": None},
    "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3, "input_tokens_details": {"cached_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 0}},
    "max_output_tokens": None, "max_tool_calls": None, "store": True, "background": False, "service_tier": "default",
    "metadata": {}, "safety_identifier": None, "prompt_cache_key": None,
}


def test_a_complete_response_is_valid_and_extension_items_are_not_judged() -> None:
    assert response_problems(GOOD) == []
    extended = {**GOOD, "output": [*GOOD["output"], {"id": "x", "type": "respstream:web_search_call", "status": "x"}]}
    assert response_problems(extended) == []
    assert response_problems({**GOOD, "output": [{"id": "x", "type": "web_search_call"}]}) != []


@pytest.mark.parametrize(("change", "path"), [
    ({"temperature": None}, "temperature"),
    ({"completed_at": 1.5}, "completed_at"),
    ({"truncation": "sometimes"}, "truncation"),
    ({"tools": [{"type": "function", "name": "f"}]}, "tools[0]"),
    ({"tool_choice": "maybe"}, "tool_choice"),
    ({"text": {}}, "text"),
])
def test_each_wrong_field_is_named(change: dict[str, Any], path: str) -> None:
    problems = response_problems({**GOOD, **change})
    assert len(problems) == 1 and problems[0].startswith(path), problems


def test_a_missing_required_field_is_named() -> None:
    broken = {k: v for k, v in GOOD.items() if k != "presence_penalty"}
    assert response_problems(broken) == ["(root): Object missing required field `presence_penalty`"]


def test_events() -> None:
    delta = {"type": "response.output_text.delta", "sequence_number": 3, "item_id": "m", "output_index": 0,
             "content_index": 0, "delta": "x", "logprobs": []}
    assert event_problems(delta) == []
    assert event_problems({**delta, "output_index": "0"})[0].startswith("output_index:")
    assert event_problems({"type": "response.completed", "sequence_number": 9, "response": GOOD}) == []
    bad_response = {**GOOD, "top_p": None}
    assert event_problems({"type": "response.completed", "sequence_number": 9, "response": bad_response}) == [
        "response.top_p: Expected `float`, got `null`"]
    assert event_problems({"type": "error", "sequence_number": 1,
                           "error": {"type": "server_error", "code": "x", "message": "m", "param": None}}) == []
    assert event_problems({"type": "error", "sequence_number": 1, "code": "x", "message": "m"})  # the flat shape
    assert event_problems({"type": "respstream:response.routing.completed", "sequence_number": 1}) == []
    assert "not one of the spec's" in event_problems({"type": "response.reasoning_text.delta"})[0]
