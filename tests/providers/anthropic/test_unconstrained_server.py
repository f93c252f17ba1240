"""A server that applies neither ``output_config.format`` nor a forced ``tool_choice`` (llama.cpp's /v1/messages,
``constrained=False``): structured output and a forced tool are refused naming the field, the rest is sent as to
Claude; a Claude upstream (the default) still sends both. No model, no network: the bodies are built in-process
(the same checks run against the real llama.cpp in test_embedded_messages.py)."""

from __future__ import annotations

from typing import Any

import pytest

from respstream.server.http_errors import HTTPError
from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream
from respstream.server.upstream.provider_tools import RefusedField

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "weather", "description": "Weather for a city",
                                            "parameters": SCHEMA}}
NAMED = {"type": "function", "function": {"name": "weather"}}


def request(**fields: Any) -> GenerationRequest:
    return GenerationRequest(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}], **fields)


def upstream(constrained: bool) -> AnthropicUpstream:
    return AnthropicUpstream("http://127.0.0.1:9", name="messages", models=["m"], constrained=constrained)


@pytest.mark.parametrize(("field", "fields"), [
    ("text.format", {"options": {"response_format": JSON_SCHEMA}}),
    ("text.format", {"options": {"response_format": {"type": "json_object"}}}),
    ("tool_choice", {"tools": [WEATHER], "tool_choice": "required"}),
    ("tool_choice", {"tools": [WEATHER], "tool_choice": NAMED}),
    ("tool_choice", {"tools": [WEATHER], "tool_choice": {"type": "allowed_tools", "mode": "required"}}),
])
def test_what_the_server_would_drop_is_refused(field: str, fields: dict[str, Any]) -> None:
    # (the small model's template renders no tools: nothing can force a call there)
    with pytest.raises(RefusedField) as refused:
        upstream(False).body(request(**fields))
    assert refused.value.field == field
    with pytest.raises(HTTPError) as answered:  # the embedded kind, before its model is loaded
        EmbeddedUpstream(api="anthropic", model_size="small").check_request(request(**fields))
    assert answered.value.status == 400 and answered.value.param == field
    assert "llama.cpp /v1/messages" in str(answered.value)


def test_auto_none_and_plain_text_are_sent() -> None:
    body = upstream(False).body(request(tools=[WEATHER], tool_choice="auto", options={"response_format":
                                                                                      {"type": "text"}}))
    assert body["tool_choice"] == {"type": "auto"} and "output_config" not in body
    # (llama.cpp reads no tool_choice none: the tools are left out instead, so no call can happen)
    body = upstream(False).body(request(tools=[WEATHER], tool_choice="none"))
    assert "tools" not in body and "tool_choice" not in body
    assert upstream(True).body(request(tools=[WEATHER], tool_choice="none"))["tool_choice"] == {"type": "none"}
    EmbeddedUpstream(api="anthropic", model_size="small").check_request(request(tools=[WEATHER]))


def test_claude_still_gets_both() -> None:
    body = upstream(True).body(request(tools=[WEATHER], tool_choice=NAMED, options={"response_format": JSON_SCHEMA}))
    assert body["tool_choice"] == {"type": "tool", "name": "weather"}
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


def test_the_chat_path_of_the_embedded_model_takes_structured_output() -> None:
    EmbeddedUpstream(api="chat", model_size="small").check_request(request(options={"response_format": JSON_SCHEMA}))
