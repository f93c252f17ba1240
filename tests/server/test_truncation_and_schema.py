"""The gateway-side parts of two request fields, unit by unit: ``truncation`` (server/inputs/truncation.py) and the
``text.format`` parse/validate pair (server/inputs/structured_output.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.structured_output import (
    MAX_VALIDATED_CHARS,
    TextFormat,
    check_output,
    check_schema,
    parse_text_format,
)
from respstream.server.inputs.truncation import estimate_messages, fit_context


def _user(words: int, tag: str) -> dict[str, Any]:
    return {"role": "user", "content": f"{tag} " + "w " * words}


def test_a_context_that_fits_is_returned_unchanged() -> None:
    messages = [_user(10, "a")]
    assert fit_context(messages, window=1000, max_output_tokens=100, truncation="disabled", model="m") is messages
    assert fit_context(messages, window=None, max_output_tokens=None, truncation="disabled", model="m") is messages


def test_disabled_counts_max_output_tokens_and_names_the_window() -> None:
    messages = [_user(100, "a")]
    need = estimate_messages(messages)
    fit_context(messages, window=need, max_output_tokens=None, truncation="disabled", model="m")
    with pytest.raises(HTTPError) as info:
        fit_context(messages, window=need, max_output_tokens=1, truncation="disabled", model="m")
    assert info.value.status == 400 and info.value.code == "context_length_exceeded"
    assert f"({need} tokens)" in str(info.value.message)


def test_auto_keeps_system_and_a_tool_call_with_its_results() -> None:
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "r " * 50}
    system = {"role": "system", "content": "be brief"}
    messages = [system, _user(200, "old"), call, result, _user(200, "mid"), _user(5, "new")]
    window = estimate_messages([system, _user(200, "mid"), _user(5, "new")]) + 1
    kept = fit_context(messages, window=window, max_output_tokens=None, truncation="auto", model="m")
    assert kept[0] is system and kept[-1] is messages[-1]
    assert call not in kept and result not in kept  # the call went with its result: no orphan either way
    assert messages[4] in kept


def test_auto_never_drops_the_calls_the_request_continues() -> None:
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    messages = [_user(300, "old"), _user(5, "q"), call, result]
    kept = fit_context(messages, window=estimate_messages(messages[1:]), max_output_tokens=None, truncation="auto",
                       model="m")
    assert kept == messages[1:]


def test_auto_still_refuses_when_the_newest_turn_alone_is_too_long() -> None:
    with pytest.raises(HTTPError) as info:
        fit_context([_user(10, "a"), _user(500, "b")], window=100, max_output_tokens=None, truncation="auto",
                    model="m")
    assert info.value.code == "context_length_exceeded"


SCHEMA = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["tags"]}


def test_text_format_parses_and_maps_to_response_format() -> None:
    fmt = parse_text_format({"type": "json_schema", "name": "t", "schema": SCHEMA, "strict": True})
    assert fmt.response_format() == {"type": "json_schema", "json_schema": {"name": "t", "schema": SCHEMA,
                                                                            "strict": True}}
    assert parse_text_format({"type": "json_object"}).response_format() == {"type": "json_object"}
    assert parse_text_format(None).response_format() is None


@pytest.mark.parametrize(("raw", "param"), [
    ({"type": "json_schema", "schema": SCHEMA}, "text.format.name"),
    ({"type": "json_schema", "name": "bad name!", "schema": SCHEMA}, "text.format.name"),
    ({"type": "json_schema", "name": "t"}, "text.format.schema"),
    ({"type": "json_schema", "name": "t", "schema": SCHEMA, "strict": "yes"}, "text.format.strict"),
    ({"type": "json_schema", "name": "t", "schema": SCHEMA, "grammar": "x"}, "text.format.grammar"),
    ({"type": "json_object", "schema": SCHEMA}, "text.format.schema"),
    ("json", "text.format"),
])
def test_bad_text_format_names_the_field(raw: Any, param: str) -> None:
    with pytest.raises(HTTPError) as info:
        parse_text_format(raw)
    assert info.value.status == 400 and info.value.param == param


def test_a_schema_that_breaks_its_meta_schema_is_a_400_naming_it() -> None:
    fmt = parse_text_format({"type": "json_schema", "name": "t", "schema": {"type": 5}})
    with pytest.raises(HTTPError) as info:
        asyncio.run(check_schema(fmt))
    assert info.value.status == 400 and info.value.param == "text.format.schema"
    assert "at '/type'" in info.value.message


def test_check_output_names_the_json_path() -> None:
    fmt = TextFormat("json_schema", name="t", schema=SCHEMA)
    assert asyncio.run(check_output('{"tags": ["a", "b"]}', fmt)) is None
    problem = asyncio.run(check_output('{"tags": ["a", 3]}', fmt))
    assert problem is not None and "$.tags[1]" in problem
    assert "not valid JSON" in (asyncio.run(check_output('{"tags": [', fmt)) or "")
    assert "not an object" in (asyncio.run(check_output("[1]", TextFormat("json_object"))) or "")
    assert asyncio.run(check_output("anything", TextFormat())) is None
    too_long = '{"tags": ["' + "x" * MAX_VALIDATED_CHARS + '"]}'
    assert "too long" in (asyncio.run(check_output(too_long, fmt)) or "")


def test_remote_refs_are_never_fetched() -> None:
    # A $ref to a URL cannot be resolved without the network: the answer fails (no fetch is attempted).
    fmt = parse_text_format({"type": "json_schema", "name": "t", "schema": {"$ref": "https://example.com/s.json"}})
    problem = asyncio.run(check_output("{}", fmt))
    assert problem is not None and "cannot be applied" in problem
