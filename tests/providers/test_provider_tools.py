"""The provider-neutral request pieces both provider adapters share (upstream/provider_tools.py)."""

from __future__ import annotations

import re

import pytest

from respstream.server.upstream.provider_tools import (
    FunctionTool,
    RefusedField,
    ToolChoice,
    ToolNames,
    arguments_object,
    call_arguments,
    function_tools,
    refused_as_http,
    tool_choice_of,
)

_ANTHROPIC_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def test_valid_names_pass_unchanged_and_restore() -> None:
    names = ToolNames(_ANTHROPIC_NAME, 64)
    assert names.to_provider("crm__lookup") == "crm__lookup"
    assert names.from_provider("crm__lookup") == "crm__lookup"


@pytest.mark.parametrize("name", ["a" * 100, "shop.orders__get", "ns__ünïcode", "x" * 50 + "__" + "y" * 50])
def test_unsafe_names_get_a_stable_safe_name_that_restores(name: str) -> None:
    first, second = ToolNames(_ANTHROPIC_NAME, 64), ToolNames(_ANTHROPIC_NAME, 64)
    safe = first.to_provider(name)
    assert _ANTHROPIC_NAME.fullmatch(safe), safe
    assert safe == second.to_provider(name)  # the same in every request: history calls match the next turn's tools
    assert first.from_provider(safe) == name


def test_two_long_names_with_one_prefix_stay_distinct() -> None:
    names = ToolNames(_ANTHROPIC_NAME, 64)
    a, b = names.to_provider("p" * 80 + "_a"), names.to_provider("p" * 80 + "_b")
    assert a != b
    assert (names.from_provider(a), names.from_provider(b)) == ("p" * 80 + "_a", "p" * 80 + "_b")


def test_unknown_provider_name_passes_through() -> None:
    assert ToolNames(_ANTHROPIC_NAME, 64).from_provider("never_offered") == "never_offered"


@pytest.mark.parametrize(("choice", "expected"), [
    (None, ToolChoice("auto")),
    ("auto", ToolChoice("auto")),
    ("required", ToolChoice("required")),
    ("none", ToolChoice("none")),
    ({"type": "function", "function": {"name": "f"}}, ToolChoice("named", "f")),
    ({"type": "function", "name": "g"}, ToolChoice("named", "g")),
    ({"type": "allowed_tools", "mode": "required", "tools": []}, ToolChoice("required")),
    ({"type": "allowed_tools", "mode": "auto", "tools": []}, ToolChoice("auto")),
])
def test_tool_choice_shapes(choice: object, expected: ToolChoice) -> None:
    assert tool_choice_of(choice) == expected


@pytest.mark.parametrize("choice", ["sometimes", {"type": "function"}, {"type": "web_search"}, 3])
def test_tool_choice_refused_names_the_field(choice: object) -> None:
    with pytest.raises(RefusedField) as info:
        tool_choice_of(choice)
    assert info.value.field == "tool_choice"


def test_function_tools_from_chat_and_responses_shapes() -> None:
    chat = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    flat = {"type": "function", "name": "g", "strict": True}
    assert function_tools([chat, flat]) == [
        FunctionTool("f", "d", {"type": "object"}),
        FunctionTool("g", "", {"type": "object", "properties": {}}, strict=True),
    ]
    with pytest.raises(RefusedField) as info:
        function_tools([{"type": "file_search"}])
    assert info.value.field == "tools"


def test_empty_arguments_are_an_empty_object() -> None:
    assert call_arguments("") == "{}"
    assert call_arguments("  ") == "{}"
    assert call_arguments('{"a": 1}') == '{"a": 1}'
    assert arguments_object("", "input[1]") == {}
    assert arguments_object('{"a": [1]}', "input[1]") == {"a": [1]}


@pytest.mark.parametrize("raw", ['{"location": "Fl', "[1, 2]", "nope"])
def test_bad_history_arguments_refused_naming_where(raw: str) -> None:
    with pytest.raises(RefusedField) as info:
        arguments_object(raw, "input[3].arguments")
    assert info.value.field == "input[3].arguments"


def test_refusal_is_a_400_naming_the_field() -> None:
    error = refused_as_http(RefusedField("text.verbosity", "no such setting"), "Anthropic")
    assert (error.status, error.code, error.param) == (400, "unsupported_parameter", "text.verbosity")
    assert "text.verbosity" in error.message and "Anthropic" in error.message
