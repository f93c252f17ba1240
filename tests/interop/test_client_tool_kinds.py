"""Every client-run tool type of the current Responses API through the official ``openai`` SDK, in all three
dialects, on our gateway over loopback with the SIMULATED scripted upstream (it calls whichever of its tools the
request offers, as flat Chat Completions functions; then answers a tool result with text).

What the gateway must do (issue #29): ``namespace`` tools flattened upstream and restored on the way back
(``function_call`` with ``namespace`` + inner ``name``), ``custom`` tools as ``custom_tool_call`` items with
``response.custom_tool_call_input.*`` events, ``shell`` / ``local_shell`` / ``apply_patch`` as client call items,
their ``*_output`` items accepted as input (``store: false``, full history each turn), ``tool_search`` /
``defer_loading`` accepted, and hosted tools it cannot run refused with ``unsupported_parameter``. In Open Responses
the kinds the spec lacks carry the ``respstream:`` prefix (items, events, and the answers a client sends back), and
the Response echoes the flat functions the model was offered (the spec has no such tool types).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from respstream.protocol.stream import StreamCore

from .gateways import Gateway, serve

# The scripted upstream's names are the FLAT function names the gateway offers it.
UPSTREAM = "scripted:6?delay_ms=1&tool=crm__lookup,patcher,shell,local_shell,apply_patch,later"

NAMESPACE: Any = {"type": "namespace", "name": "crm", "description": "Customer records.", "tools": [
    {"type": "function", "name": "lookup", "description": "Find a customer.",
     "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}},
    {"type": "custom", "name": "note", "description": "Free text note."},
]}
CUSTOM: Any = {"type": "custom", "name": "patcher", "description": "Apply a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: /[a-z]+/"}}


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def gateway(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, UPSTREAM)


def t(gateway: Gateway, kind: str) -> str:
    """An item or event type as this dialect names it."""
    return f"respstream:{kind}" if gateway.dialect == "openresponses" else kind


def client(gateway: Gateway) -> OpenAI:
    return OpenAI(base_url=gateway.base_url, api_key="test-key", max_retries=0, timeout=20)


def _turn(gateway: Gateway, tools: list[Any], input_items: Any) -> Any:
    with client(gateway) as c:
        return c.responses.create(model="auto", input=input_items, tools=tools, store=False, stream=False)


def _round_trip(gateway: Gateway, tools: list[Any], answer: dict[str, Any]) -> tuple[Any, Any]:
    """First turn (a call), then the full history with ``answer`` (store: false, as Codex does)."""
    first = _turn(gateway, tools, "Do it.")
    call = first.output[-1].model_dump(exclude_none=True)
    history = [{"role": "user", "content": "Do it."}, call, {**answer, "call_id": call["call_id"]}]
    second = _turn(gateway, tools, history)
    return first, second


def test_namespace_call_comes_back_with_its_namespace(gateway: Gateway) -> None:
    first, second = _round_trip(gateway, [NAMESPACE], {"type": "function_call_output", "output": "found"})
    call = first.output[-1]
    assert (call.type, call.name, call.namespace) == ("function_call", "lookup", "crm")
    assert '"who"' in call.arguments
    assert second.status == "completed" and second.output_text
    # echoed as sent (Open Responses: the flat functions the model saw)
    assert first.tools[0].type == ("function" if gateway.dialect == "openresponses" else "namespace")


def test_custom_tool_streams_custom_tool_call_events(gateway: Gateway) -> None:
    with client(gateway) as c:
        events = list(c.responses.create(model="auto", input="Patch it.", tools=[CUSTOM], stream=True))
    types = [e.type for e in events]
    assert t(gateway, "response.custom_tool_call_input.delta") in types
    done = next(e for e in events if e.type == t(gateway, "response.custom_tool_call_input.done"))
    item = next(e.item for e in events if e.type == "response.output_item.done")
    assert (item.type, item.name, item.input) == (t(gateway, "custom_tool_call"), "patcher", done.input)
    assert item.input == "example"  # the bare string, not the {"input": ...} wrapper the upstream wrote
    assert types[-1] == "response.completed"


def test_custom_tool_output_is_accepted_as_input(gateway: Gateway) -> None:
    first, second = _round_trip(gateway, [CUSTOM], {"type": t(gateway, "custom_tool_call_output"),
                                                    "output": "patched"})
    assert first.output[-1].type == t(gateway, "custom_tool_call")
    assert second.status == "completed" and second.output_text


def test_shell_call_round_trip(gateway: Gateway) -> None:
    output = [{"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    first, second = _round_trip(gateway, [{"type": "shell", "environment": {"type": "local"}}],
                                {"type": t(gateway, "shell_call_output"), "output": output})
    call = first.output[-1].model_dump()  # (a dict: the SDK cannot type Open Responses' prefixed items)
    assert call["type"] == t(gateway, "shell_call") and call["action"]["commands"] == ["example"]
    assert second.status == "completed" and second.output_text


def test_local_shell_call_round_trip(gateway: Gateway) -> None:
    first = _turn(gateway, [{"type": "local_shell"}], "List files.")
    call = first.output[-1].model_dump(exclude_none=True)
    assert call["type"] == t(gateway, "local_shell_call") and call["action"]["command"] == ["example"]
    history = [{"role": "user", "content": "List files."}, call,
               {"type": "local_shell_call_output", "id": call["call_id"], "output": "a.txt"}]
    assert _turn(gateway, [{"type": "local_shell"}], history).status == "completed"


def test_apply_patch_call_round_trip(gateway: Gateway) -> None:
    first, second = _round_trip(gateway, [{"type": "apply_patch"}],
                                {"type": t(gateway, "apply_patch_call_output"), "status": "completed",
                                 "output": "done"})
    call = first.output[-1].model_dump()
    assert call["type"] == t(gateway, "apply_patch_call")
    assert call["operation"]["type"] == "create_file" and call["operation"]["path"] == "example"
    assert second.status == "completed"


def test_deferred_tools_and_tool_search_are_accepted(gateway: Gateway) -> None:
    tools = [{"type": "tool_search"}, {"type": "function", "name": "later", "defer_loading": True,
                                       "parameters": {"type": "object", "properties": {}}}]
    first = _turn(gateway, tools, "Go.")
    assert first.output[-1].type == "function_call" and first.output[-1].name == "later"  # offered from the start


def test_forced_custom_tool_choice(gateway: Gateway) -> None:
    with client(gateway) as c:
        response = c.responses.create(model="auto", input="Patch it.", tools=[CUSTOM], stream=False,
                                      tool_choice={"type": "custom", "name": "patcher"})
    assert response.output[-1].type == t(gateway, "custom_tool_call")


@pytest.mark.parametrize("kind", ["image_generation", "code_interpreter", "computer_use_preview", "file_search"])
def test_hosted_tools_it_cannot_run_are_refused(gateway: Gateway, kind: str) -> None:
    with client(gateway) as c, pytest.raises(openai.BadRequestError) as caught:
        c.responses.create(model="auto", input="Hi.", tools=[{"type": "function", "name": "f"}, {"type": kind}])
    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("unsupported_parameter", "tools[1].type")


def test_namespace_clash_is_a_clear_400(gateway: Gateway) -> None:
    with client(gateway) as c, pytest.raises(openai.BadRequestError) as caught:
        c.responses.create(model="auto", input="Hi.", tools=[{"type": "function", "name": "crm__lookup"}, NAMESPACE])
    assert "crm__lookup" in str(caught.value)


@pytest.mark.parametrize("tool", [NAMESPACE, CUSTOM, {"type": "shell"}, {"type": "apply_patch"},
                                  {"type": "local_shell"}], ids=lambda t: t["type"])
def test_streams_are_conformant(gateway: Gateway, tool: Any) -> None:
    """Our own checker (sequence, lifecycle, item rules; in Open Responses its schema and prefix rules too)."""
    raw = httpx.post(f"{gateway.base_url}/responses", json={"input": "x", "tools": [tool], "stream": True},
                     timeout=20).content
    core = StreamCore(dialect=gateway.dialect)
    core.feed(raw)
    core.close()
    assert core.violations == [] and core.result.status == "completed"
    assert core.result.output[-1]["type"] != "message"  # it ended with the call
