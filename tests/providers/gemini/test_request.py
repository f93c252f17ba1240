"""gemini/request.py and contents.py: every field mapped (each body checked against the google-genai SDK's types)
or refused with a 400 naming it, before any stream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from providers.gemini.simulated_gemini import Reply, SimulatedGemini, sse_body, validate_request
from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.gemini.request import build_body, gemini_tool_names
from respstream.server.upstream.provider_tools import REASONING_KEY, RefusedField

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}}}


def _body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    body = build_body(GenerationRequest(model="gemini-2.5-flash", messages=messages, **fields), gemini_tool_names())
    assert validate_request(body) is None, validate_request(body)
    return body


def test_system_and_developer_messages_become_the_system_instruction() -> None:
    body = _body([{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Use French."},
                  {"role": "user", "content": "hi"}])
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "Use French."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_images_and_pdfs_as_inline_or_file_data() -> None:
    body = _body([{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PNG}", "filename": "a.pdf"}},
    ]}])
    assert body["contents"][0]["parts"] == [
        {"text": "what is this?"}, {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"fileData": {"fileUri": "https://example.com/cat.jpg", "mimeType": "image/jpeg"}},
        {"inlineData": {"mimeType": "application/pdf", "data": PNG}},
    ]


def test_calls_and_results_pair_by_construction() -> None:
    body = _body([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "g1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"Rome"}'}},
            {"id": "call_gm_0123", "type": "function", "function": {"name": "lookup", "arguments": ""}}],
         REASONING_KEY: [{"summary": None, "encrypted_content": "c2ln"}]},
        {"role": "tool", "tool_call_id": "g1", "content": '{"temp": 20}'},
        {"role": "tool", "tool_call_id": "call_gm_0123", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ], tools=[TOOL])
    assert body["contents"][1:] == [
        {"role": "model", "parts": [
            {"functionCall": {"name": "lookup", "args": {"q": "Rome"}, "id": "g1"}, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "lookup", "args": {}}}]},  # (an id we made is not Gemini's: not sent)
        {"role": "user", "parts": [
            {"functionResponse": {"name": "lookup", "response": {"temp": 20}, "id": "g1"}},
            {"functionResponse": {"name": "lookup", "response": {"output": "sunny"}}},
            {"text": "thanks"}]},
    ]


def test_tools_tool_choice_and_generation_config() -> None:
    body = _body([{"role": "user", "content": "x"}], tools=[TOOL],
                 tool_choice={"type": "function", "function": {"name": "lookup"}}, max_output_tokens=64,
                 temperature=0.2, options={"top_p": 0.9, "presence_penalty": 0.1, "frequency_penalty": 0.3,
                                           "stop": ["END"], "reasoning_effort": "low", "parallel_tool_calls": True,
                                           "prompt_cache_key": "k", "response_format": {
                                               "type": "json_schema", "json_schema": {"name": "o", "schema": {
                                                   "type": "object", "properties": {"a": {"type": "integer"}}}}}})
    assert body["tools"] == [{"functionDeclarations": [{"name": "lookup", "description": "Look up",
                                                        "parametersJsonSchema": TOOL["function"]["parameters"]}]}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}}
    assert body["generationConfig"] == {
        "maxOutputTokens": 64, "temperature": 0.2, "topP": 0.9, "presencePenalty": 0.1, "frequencyPenalty": 0.3,
        "stopSequences": ["END"], "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {"a": {"type": "integer"}}}}


@pytest.mark.parametrize(("choice", "mode"), [("auto", "AUTO"), ("required", "ANY"), ("none", "NONE")])
def test_tool_choice_modes(choice: str, mode: str) -> None:
    body = _body([{"role": "user", "content": "x"}], tools=[TOOL], tool_choice=choice)
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_no_reasoning_is_a_zero_budget() -> None:
    body = _body([{"role": "user", "content": "x"}], options={"reasoning_effort": "none"})
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 0}}


def test_a_name_gemini_refuses_is_made_safe_and_comes_back() -> None:
    names = gemini_tool_names()
    long = "tools_of_a_namespace_with_a_very_long_name__and_an_even_longer_function_name"
    tool = {"type": "function", "function": {"name": long, "parameters": {"type": "object"}}}
    body = build_body(GenerationRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=[tool]), names)
    safe = body["tools"][0]["functionDeclarations"][0]["name"]
    assert safe != long and len(safe) <= 64 and validate_request(body) is None
    assert names.from_provider(safe) == long


@pytest.mark.parametrize(("options", "param"), [({"logprobs": True, "top_logprobs": 2}, "top_logprobs"),
                                                ({"verbosity": "terse"}, "text.verbosity"),
                                                ({"service_tier": "flex"}, "service_tier"),
                                                ({"reasoning_effort": "extreme"}, "reasoning.effort")])
def test_fields_gemini_cannot_take_are_refused_by_name(options: dict[str, Any], param: str) -> None:
    with pytest.raises(RefusedField) as refused:
        build_body(GenerationRequest(model="m", messages=[{"role": "user", "content": "x"}], options=options),
                   gemini_tool_names())
    assert refused.value.field == param


def test_a_refused_field_is_a_400_before_any_stream(fake: SimulatedGemini, gateway: ServerThread) -> None:
    answer = httpx.post(f"{gateway.base_url}/responses", json={
        "model": "gemini-2.5-flash", "input": "hi", "stream": True, "top_logprobs": 2}, timeout=30)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_parameter", "top_logprobs")
    assert "Gemini" in error["message"]
    assert fake.requests == []  # nothing was sent


def test_structured_output_and_instructions_through_the_gateway(fake: SimulatedGemini,
                                                               gateway: ServerThread) -> None:
    """text.format json_schema -> responseJsonSchema; the answer is checked against the schema as today."""
    fake.queue(Reply(200, sse_body(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": '{"city": '}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": '"Paris"}'}]}, "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 6, "totalTokenCount": 26}})))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    answer = httpx.post(f"{gateway.base_url}/responses", json={
        "model": "gemini-2.5-flash", "instructions": "Answer in JSON.", "stream": False, "temperature": 0,
        "max_output_tokens": 100, "input": [{"role": "developer", "content": "Only the city."},
                                            {"role": "user", "content": "Capital of France?"}],
        "text": {"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}}}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert json.loads(answer.json()["output_text"]) == {"city": "Paris"}
    sent = fake.requests[-1][1]
    assert sent["systemInstruction"] == {"parts": [{"text": "Answer in JSON."}, {"text": "Only the city."}]}
    assert sent["generationConfig"]["responseJsonSchema"] == schema
    assert sent["generationConfig"]["responseMimeType"] == "application/json"
    assert sent["generationConfig"]["maxOutputTokens"] == 100


def test_an_image_and_a_pdf_reach_gemini_through_the_gateway(fake: SimulatedGemini, gateway: ServerThread) -> None:
    fake.queue(Reply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [{"text": "A dot."}]},
                                                    "finishReason": "STOP"}]})))
    answer = httpx.post(f"{gateway.base_url}/responses", json={"model": "gemini-2.5-flash", "stream": False, "input": [
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in these?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PNG}"}]}]},
        timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["output_text"] == "A dot."
    assert fake.requests[-1][1]["contents"][0]["parts"] == [
        {"text": "What is in these?"}, {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"inlineData": {"mimeType": "application/pdf", "data": PNG}}]


def test_a_tool_rounds_message_signs_its_first_call_not_its_text() -> None:
    """A server tool's round appends its text and calls as one message, with the round's reasoning: the signature
    goes on the first functionCall (required there), not on the text."""
    body = _body([{"role": "user", "content": "x"},
                  {"role": "assistant", "content": "Let me look.", "tool_calls": [
                      {"id": "g1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
                   REASONING_KEY: [{"summary": None, "encrypted_content": "c2ln"}]},
                  {"role": "tool", "tool_call_id": "g1", "content": "found"}], tools=[TOOL])
    assert body["contents"][1]["parts"] == [
        {"text": "Let me look."},
        {"functionCall": {"name": "lookup", "args": {}, "id": "g1"}, "thoughtSignature": "c2ln"}]


def test_a_prompt_over_the_listed_context_is_a_400_before_streaming(fake: SimulatedGemini,
                                                                    gateway: ServerThread) -> None:
    """GET /v1beta/models lists gemini-tiny with 1,000 input + 100 output tokens: a prompt surely longer is refused."""
    answer = httpx.post(f"{gateway.base_url}/responses", json={
        "model": "gemini-tiny", "input": "word " * 3000, "stream": True}, timeout=30)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "context_length_exceeded" and "inputTokenLimit" in error["message"]
    assert fake.requests == []


def test_input_token_counts_do_not_post_the_prompt_elsewhere(fake: SimulatedGemini, gateway: ServerThread) -> None:
    """POST /v1/responses/input_tokens estimates for a Gemini model: nothing is sent to the provider's host."""
    seen = len(fake.headers_seen)
    answer = httpx.post(f"{gateway.base_url}/responses/input_tokens", json={
        "model": "gemini-2.5-flash", "input": "How many tokens is this?"}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["input_tokens"] > 0
    assert len(fake.headers_seen) == seen


def test_what_codex_cli_sends_is_taken_verbosity_in_the_system_instruction() -> None:
    """Codex CLI sends text.verbosity and service_tier priority: the first is asked for in words, the second needs
    nothing sent."""
    body = _body([{"role": "system", "content": "You are Codex."}, {"role": "user", "content": "x"}],
                 options={"verbosity": "low", "service_tier": "priority", "prompt_cache_key": "k"})
    assert body["systemInstruction"] == {"parts": [{"text": "You are Codex."},
                                                   {"text": "Answer concisely: keep explanations short."}]}
    assert "generationConfig" not in body
    assert "systemInstruction" not in _body([{"role": "user", "content": "x"}], options={"verbosity": "medium"})
