"""What Codex CLI 0.169 sends with its default model (found by the client matrix, tests/clients/test_codex.py): its
tools in an ``additional_tools`` input item, and ``reasoning.context``. Parsed sans-IO by ``parse_request``."""

from __future__ import annotations

from typing import Any

import pytest

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.requests import parse_request

EXEC: Any = {"type": "function", "name": "exec_command", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
CODE: Any = {"type": "namespace", "name": "functions", "description": "", "tools": [
    {"type": "custom", "name": "exec", "description": "Run JavaScript."}]}


def parse(body: dict[str, Any]) -> Any:
    return parse_request({"model": "auto", **body}, server_tool_names=set(), dialect="openai")


def test_additional_tools_join_the_request_tools_and_leave_the_input() -> None:
    req = parse({"tools": [EXEC], "input": [
        {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [CODE]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]})
    assert [t["name"] for t in req.client_tools] == ["exec_command", "functions__exec"]  # namespace flattened
    assert [(i.type, i.text) for i in req.input] == [("message", "hi")]


@pytest.mark.parametrize(("item", "param"), [
    ({"type": "additional_tools", "role": "user", "tools": [EXEC]}, "input[0].role"),
    ({"type": "additional_tools", "role": "developer", "tools": {"a": 1}}, "input[0].tools"),
    ({"type": "additional_tools", "role": "developer", "tools": [{"type": "nope"}]}, "tools[0].type"),
])
def test_bad_additional_tools_are_refused_by_name(item: dict[str, Any], param: str) -> None:
    with pytest.raises(HTTPError) as caught:
        parse({"input": [item, {"role": "user", "content": "hi"}]})
    assert caught.value.status == 400
    assert caught.value.param == param


def test_reasoning_context_is_taken_and_echoed_as_the_effective_mode() -> None:
    req = parse({"input": "hi", "reasoning": {"effort": "low", "context": "all_turns"}})
    assert req.reasoning == {"effort": "low", "summary": None, "context": "current_turn"}
    assert "context" not in parse({"input": "hi"}).reasoning  # not asked: the echo is unchanged
    with pytest.raises(HTTPError) as caught:
        parse({"input": "hi", "reasoning": {"context": "every_turn"}})
    assert caught.value.param == "reasoning.context"
