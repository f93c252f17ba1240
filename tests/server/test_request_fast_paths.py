"""The request parser's fast paths for absent fields (issue 41): parse_fields for a request that sends none of the
option fields gives the same result as the full parse, and no field the full parse reads can be missing from the set
that decides which path runs; parse_request's refusals and tool_choice still hold when the fields are given."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest

from respstream.server.http_errors import HTTPError
from respstream.server.inputs import request_fields, requests
from respstream.server.inputs.request_fields import _OPTION_FIELDS, _parse_given, parse_fields
from respstream.server.inputs.requests import _REFUSABLE_FIELDS, parse_request

PLAIN_BODIES: list[dict[str, Any]] = [
    {"model": "m", "input": "hello", "stream": True},
    {"input": [{"role": "user", "content": "hi"}], "store": False, "metadata": {"a": "b"}},
    {"input": "x", "prompt_cache_retention": "24h"},
    {"input": "x", "prompt_cache_options": {"ttl": "12h", "mode": "explicit"}},
    {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi",
                                              "cache_control": {"type": "ephemeral"}}]}]},
]


@pytest.mark.parametrize("body", PLAIN_BODIES)
def test_fast_path_equals_the_full_parse(body: dict[str, Any]) -> None:
    assert _OPTION_FIELDS.isdisjoint(body)
    assert parse_fields(body) == _parse_given(body)


def test_fast_path_results_are_not_shared() -> None:
    first, second = parse_fields({"input": "a"}), parse_fields({"input": "b"})
    first.include.append("reasoning.encrypted_content")
    assert second.include == []


@pytest.mark.parametrize("field", sorted(_OPTION_FIELDS))
def test_a_null_option_field_takes_the_full_path_and_still_parses(field: str) -> None:
    assert parse_fields({"input": "x", field: None}) == _parse_given({"input": "x"})


@pytest.mark.parametrize(("field", "value"), [("truncation", "sometimes"), ("user", 5), ("include", "x"),
                                              ("background_options", {"continuation_id": "c"})])
def test_a_bad_option_field_is_still_refused_by_name(field: str, value: Any) -> None:
    with pytest.raises(HTTPError) as caught:
        parse_fields({"input": "x", field: value})
    assert caught.value.param is not None and caught.value.param.startswith(field)


def test_every_field_the_full_parse_reads_decides_the_path() -> None:
    """A field added to the full parse but not to ``_OPTION_FIELDS`` would be silently dropped by the fast path."""
    read: set[str] = set()
    for name in ("_parse_given", "_completion_window"):
        tree = ast.parse(inspect.getsource(getattr(request_fields, name)))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "body"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                read.add(node.args[0].value)
    read -= {"background", "stream"}  # read by _completion_window only once background_options is given
    assert read, "found no body.get calls: the test no longer sees the parse"
    assert read <= _OPTION_FIELDS, sorted(read - _OPTION_FIELDS)


@pytest.mark.parametrize(("field", "value"), [("prompt", {"id": "p"}), ("project_id", "nope"), ("moderation", {}),
                                              ("multi_agent", {"enabled": True}), ("image", {})])
def test_refusable_fields_are_still_refused_by_name(field: str, value: Any) -> None:
    assert field in _REFUSABLE_FIELDS
    with pytest.raises(HTTPError) as caught:
        parse_request({"input": "x", field: value}, server_tool_names=set())
    assert caught.value.status == 400 and caught.value.param == field


def test_the_refusal_checks_read_only_refusable_fields() -> None:
    tree = ast.parse(inspect.getsource(requests._check_unsupported))
    read = {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant)}
    assert read == {"project_id"}  # plus the loop over _UNSUPPORTED_FIELDS
    assert set(requests._UNSUPPORTED_FIELDS) <= _REFUSABLE_FIELDS


def test_tool_choice_absent_is_auto_and_given_is_still_checked() -> None:
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    plain = parse_request({"input": "x", "tools": tools}, server_tool_names=set())
    assert plain.tool_choice == "auto" and plain.tool_policy.forced is None
    forced = parse_request({"input": "x", "tools": tools, "tool_choice": {"type": "function", "name": "f"}},
                           server_tool_names=set())
    assert forced.tool_policy.forced == "f"
    with pytest.raises(HTTPError) as caught:
        parse_request({"input": "x", "tools": tools, "tool_choice": {"type": "function", "name": "ghost"}},
                      server_tool_names=set())
    assert caught.value.param == "tool_choice"
