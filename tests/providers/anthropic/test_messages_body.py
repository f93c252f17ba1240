"""The Messages body built from Chat-shaped history (upstream/anthropic/request.py) alone: the provider's rules hold by
construction whatever order the history comes in, and every body passes the official SDK's request types."""

from __future__ import annotations

from typing import Any

import pytest

from respstream.server.upstream.anthropic.request import build_messages_body, tool_names
from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.provider_tools import REASONING_KEY, RefusedField

from .sdk_shapes import request_problems


def body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    built = build_messages_body(GenerationRequest(model="claude", messages=messages, **fields), model="claude",
                                names=tool_names())
    assert request_problems(built) == []
    return built


def call(call_id: str, name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_tool_result_goes_right_after_its_call_even_when_a_user_message_came_first() -> None:
    turns = body([{"role": "user", "content": "go"},
                  {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
                  {"role": "user", "content": "and hurry"},
                  {"role": "tool", "tool_call_id": "b", "content": "B"},
                  {"role": "tool", "tool_call_id": "a", "content": "A"}])["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [(b["type"], b.get("tool_use_id")) for b in turns[2]["content"]] == [
        ("tool_result", "b"), ("tool_result", "a"), ("text", None)]


def test_same_role_messages_merge_and_roles_alternate() -> None:
    turns = body([{"role": "user", "content": "one"}, {"role": "user", "content": "two"},
                  {"role": "assistant", "content": "three"}, {"role": "assistant", "content": "four"},
                  {"role": "user", "content": "five"}])["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["text"] for b in turns[0]["content"]] == ["one", "two"]


def test_a_result_whose_call_is_not_in_the_history_is_text() -> None:
    turns = body([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "gone", "content": "42"}])
    assert turns["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hi"}, {"type": "text", "text": "Tool result (gone): 42"}]}]


def test_reasoning_goes_back_in_place_redacted_and_signed() -> None:
    turns = body([{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "\n\n", REASONING_KEY: []},
                  {"role": "assistant", "content": "answer", REASONING_KEY: [
                      {"summary": None, "encrypted_content": "DATA"},
                      {"summary": "thought", "encrypted_content": "SIG"},
                      {"summary": "not ours", "encrypted_content": ""}]},
                  {"role": "user", "content": "more"}])["messages"]
    assert turns[1]["content"] == [{"type": "redacted_thinking", "data": "DATA"},
                                   {"type": "thinking", "thinking": "thought", "signature": "SIG"},
                                   {"type": "text", "text": "\n\nanswer"}]


def test_reasoning_after_the_turns_last_item_goes_back_after_it() -> None:
    turns = body([{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "partial", REASONING_KEY: [
                      {"summary": "cut short", "encrypted_content": "SIG", "after": True}]},
                  {"role": "user", "content": "go on"}])["messages"]
    assert turns[1]["content"] == [{"type": "text", "text": "partial"},
                                   {"type": "thinking", "thinking": "cut short", "signature": "SIG"}]


def test_cache_breakpoints_are_at_most_four_and_never_on_thinking() -> None:
    built = build_messages_body(GenerationRequest(
        model="claude", messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                                  {"role": "assistant", "content": None, "tool_calls": [call("a")],
                                   REASONING_KEY: [{"summary": "t", "encrypted_content": "SIG"}]},
                                  {"role": "tool", "tool_call_id": "a", "content": "r"}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        options={"prompt_cache_key": "k"}), model="claude", names=tool_names())
    marked = [b for b in [*built["system"], *built["tools"], *(b for t in built["messages"] for b in t["content"])]
              if "cache_control" in b]
    assert len(marked) == 3 and all(b.get("type") != "thinking" for b in marked)
    assert built["messages"][1]["content"][-1]["type"] == "tool_use" and "cache_control" in \
        built["messages"][1]["content"][-1]


@pytest.mark.parametrize(("messages", "field"), [
    ([{"role": "system", "content": "only instructions"}], "input"),
    ([{"role": "user", "content": "q"},
      {"role": "assistant", "content": None, "tool_calls": [call("a", arguments='{"cut": "sh')]},
      {"role": "tool", "tool_call_id": "a", "content": "r"}], "input (message 1): tool call 'a' arguments"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}], "input (message 0)"),
])
def test_history_anthropic_cannot_take_is_refused_naming_where(messages: list[dict[str, Any]], field: str) -> None:
    with pytest.raises(RefusedField) as info:
        build_messages_body(GenerationRequest(model="claude", messages=messages), model="claude", names=tool_names())
    assert info.value.field == field


def test_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(RefusedField) as info:
        body([{"role": "user", "content": "q"}], options={"a_new_option": 1})
    assert info.value.field == "a_new_option"


@pytest.mark.parametrize(("model", "max_tokens"), [("claude-3-opus-20240229", 4096), ("claude-3-5-haiku-latest", 8192),
                                                   ("claude-sonnet-4-5", 8192)])
def test_the_default_max_tokens_fits_the_older_models(model: str, max_tokens: int) -> None:
    built = build_messages_body(GenerationRequest(model=model, messages=[{"role": "user", "content": "q"}]),
                                model=model, names=tool_names())
    assert built["max_tokens"] == max_tokens
    given = build_messages_body(GenerationRequest(model=model, messages=[{"role": "user", "content": "q"}],
                                                  max_output_tokens=100), model=model, names=tool_names())
    assert given["max_tokens"] == 100
