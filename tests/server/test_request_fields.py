"""No request field silently dropped: every field of the Open Responses ``CreateResponseBody`` is forwarded to the
upstream, implemented by the gateway, or refused with 400 naming it.

The upstream is the SIMULATED FakeChatCompletionsServer (tests/fakes/chat_server.py): a real HTTP Chat Completions
server on loopback that RECORDS every request body, reached through the real adapter. The spec's field list is read
from the vendored OpenAPI file (tests/data/openresponses, Apache-2.0, see its LICENSE), so a field added to the spec
fails :func:`test_every_spec_field_has_a_decision` until it is handled here and in docs/compatibility.md.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.chat_server import Chunk, Done, FakeChatCompletionsServer, finish, text, tool
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .helpers import Decoded, ServerThread, post_stream

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tests" / "data" / "openresponses" / "openapi-2026-04-24.json"
COMPATIBILITY = ROOT / "docs" / "compatibility.md"
WINDOW = 1200  # the fake model's context window (tokens), small so truncation is cheap to reach

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CHAT_WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                 "parameters": WEATHER["parameters"]}}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
JSON_SCHEMA_FORMAT = {"type": "json_schema", "name": "person", "schema": SCHEMA, "strict": True}


def spec_fields() -> list[str]:
    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    return list(spec["components"]["schemas"]["CreateResponseBody"]["properties"])


# -- the decision for every field ------------------------------------------------------------------------------------
Check = dict[str, Any] | Callable[[dict[str, Any]], bool]

# Forwarded: (request fields, what the upstream's Chat Completions body must contain).
FORWARDED: dict[str, tuple[dict[str, Any], Check]] = {
    "model": ({"model": "fake-model"}, {"model": "fake-model"}),
    "input": ({"input": "Say hi."}, lambda b: b["messages"][-1] == {"role": "user", "content": "Say hi."}),
    "instructions": ({"instructions": "Be brief."}, lambda b: b["messages"][0] == {"role": "system",
                                                                                  "content": "Be brief."}),
    "temperature": ({"temperature": 0.25}, {"temperature": 0.25}),
    "top_p": ({"top_p": 0.5}, {"top_p": 0.5}),
    "presence_penalty": ({"presence_penalty": 0.75}, {"presence_penalty": 0.75}),
    "frequency_penalty": ({"frequency_penalty": -0.5}, {"frequency_penalty": -0.5}),
    "max_output_tokens": ({"max_output_tokens": 64}, {"max_tokens": 64}),
    "top_logprobs": ({"top_logprobs": 3}, {"logprobs": True, "top_logprobs": 3}),
    "include": ({"include": ["message.output_text.logprobs"]}, {"logprobs": True}),
    "reasoning": ({"reasoning": {"effort": "low"}}, {"reasoning_effort": "low"}),
    "text": ({"text": {"format": JSON_SCHEMA_FORMAT, "verbosity": "low"}},
             {"verbosity": "low", "response_format": {"type": "json_schema", "json_schema": {
                 "name": "person", "schema": SCHEMA, "strict": True}}}),
    # (the platform dialect also offers its server-side catalogue: the client tool must be among what is offered)
    "tools": ({"tools": [WEATHER]}, lambda b: CHAT_WEATHER in b["tools"]),
    "tool_choice": ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_weather"}},
                    {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    "parallel_tool_calls": ({"tools": [WEATHER], "parallel_tool_calls": False}, {"parallel_tool_calls": False}),
    "prompt_cache_key": ({"prompt_cache_key": "user-42-chat"}, {"prompt_cache_key": "user-42-chat"}),
    "safety_identifier": ({"safety_identifier": "u-7f3a"}, {"safety_identifier": "u-7f3a"}),
    "service_tier": ({"service_tier": "flex"}, {"service_tier": "flex"}),
}

# Implemented by the gateway itself: the test that shows it.
GATEWAY: dict[str, str] = {
    "previous_response_id": "test_previous_response_id_chains_the_context",
    "metadata": "test_metadata_limits_are_openai_s",
    "stream": "test_stream_false_returns_the_response_json",
    "stream_options": "test_stream_options_obfuscation",
    "background": "test_background_runs_and_is_retrievable",
    "max_tool_calls": "test_max_tool_calls_bounds_the_calls",
    "truncation": "test_truncation_disabled_is_a_400_and_auto_drops_the_oldest_turns",
    "store": "test_store_false_keeps_nothing",
}

# Values refused with 400 naming the field (the field itself is honoured for other values).
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"include": ["code_interpreter_call.outputs"]}, "unsupported_parameter", "include[0]"),
    ({"reasoning": {"summary": "detailed"}}, "unsupported_parameter", "reasoning.summary"),
    ({"stream_options": {"include_obfuscation": True}}, "unsupported_parameter",
     "stream_options.include_obfuscation"),
    ({"stream_options": {"chunk_size": 3}}, "unsupported_parameter", "stream_options.chunk_size"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "nope"}}}}, "invalid_value",
     "text.format.schema"),
    ({"text": {"verbosity": "loud"}}, "invalid_value", "text.verbosity"),
    ({"top_p": 1.5}, "invalid_value", "top_p"),
    ({"presence_penalty": 3}, "invalid_value", "presence_penalty"),
    ({"frequency_penalty": "x"}, "invalid_type", "frequency_penalty"),
    ({"top_logprobs": 21}, "invalid_value", "top_logprobs"),
    ({"max_tool_calls": 0}, "invalid_value", "max_tool_calls"),
    ({"reasoning": {"effort": "max"}}, "invalid_value", "reasoning.effort"),
    ({"truncation": "sometimes"}, "invalid_value", "truncation"),
    ({"service_tier": "gold"}, "invalid_value", "service_tier"),
    ({"safety_identifier": "x" * 65}, "invalid_value", "safety_identifier"),
    ({"prompt_cache_key": "k" * 65}, "invalid_value", "prompt_cache_key"),
    ({"prompt": {"id": "pmpt_1"}}, "unsupported_parameter", "prompt"),
    ({"response_format": {"type": "json_object"}}, "unsupported_parameter", "response_format"),
    ({"tools": [WEATHER], "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function", "name": "x"}]}},
     "invalid_value", "tool_choice.tools[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_url": "ftp://example.com/a.pdf"}]}]},
     "invalid_value", "input[0].content[0].file_url"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
     "unsupported_parameter", "input[0].content[0].file_id"),
]


def test_every_spec_field_has_a_decision() -> None:
    fields = spec_fields()
    assert len(fields) >= 26  # the 2026-04-24 spec has 26; fewer means the file was not read right
    undecided = [f for f in fields if f not in FORWARDED and f not in GATEWAY]
    assert undecided == [], f"spec fields with no decision (forward, implement or refuse): {undecided}"
    for name in GATEWAY.values():
        assert callable(globals().get(name)), name


def test_compatibility_md_has_a_row_per_field() -> None:
    doc = COMPATIBILITY.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_.]+)`", doc, flags=re.MULTILINE))
    missing = [f for f in spec_fields() if f not in rows]
    assert missing == [], f"docs/compatibility.md has no row for: {missing}"
    for extra in ("conversation", "user", "prompt", "stream_options.include_obfuscation", "text.format",
                  "text.verbosity", "reasoning.effort", "reasoning.summary"):
        assert extra in rows, extra


# -- the gateway in front of the recording fake ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def fake() -> Iterator[FakeChatCompletionsServer]:
    with FakeChatCompletionsServer(models=["fake-model"]) as server:
        yield server


@pytest.fixture(scope="module", params=["openai", "platform"])
def gateway(request: pytest.FixtureRequest, fake: FakeChatCompletionsServer) -> Iterator[tuple[str, str]]:
    config = Config(
        dialect=request.param, upstreams=[fake.url], upstream_options={"retries": 0, "idle_timeout": 5.0},
        models={"aliases": {"gpt-4o-mini": "auto", "my-model": "fake-model"},
                "input_modalities": {"fake-model": ["text", "image", "file"]},
                "context_window": {"fake-model": WINDOW}},
    )
    with ServerThread(create_app(config)) as server:
        yield server.url, request.param


@pytest.fixture
def gw(gateway: tuple[str, str], fake: FakeChatCompletionsServer) -> tuple[str, str, FakeChatCompletionsServer]:
    fake.reset(default_script=True)
    return gateway[0], gateway[1], fake


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(timeout=20) as client:
        return client.post(f"{url}/v1/responses", json=body)


def _stream(url: str, dialect: str, body: dict[str, Any]) -> Decoded:
    d = post_stream(url, {"input": "Say hi.", "model": "fake-model", **body}, dialect=dialect)
    assert d.status_code == 200, d.raw[:500]
    assert d.violations == [], d.violations
    return d


def _contains(sent: dict[str, Any], check: Check) -> bool:
    if callable(check):
        return check(sent)
    return all(sent.get(k) == v for k, v in check.items())


@pytest.mark.parametrize("name", list(FORWARDED))
def test_forwarded_field_arrives_upstream_as_sent(gw: tuple[str, str, FakeChatCompletionsServer], name: str) -> None:
    url, dialect, fake = gw
    body, check = FORWARDED[name]
    if name == "text":
        fake.script(text('{"name": "Ada", "age": 36}'), finish(), Done())
    _stream(url, dialect, body)
    sent = fake.requests[-1]
    assert _contains(sent, check), json.dumps(sent)[:800]


def test_unset_fields_are_left_to_the_upstream(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    _stream(url, dialect, {})
    sent = fake.requests[-1]
    for key in ("top_p", "presence_penalty", "frequency_penalty", "logprobs", "reasoning_effort", "response_format",
                "verbosity", "prompt_cache_key", "safety_identifier", "service_tier", "user", "max_tokens",
                "temperature"):
        assert key not in sent, key
    if dialect != "platform":  # no tools listed: none offered (platform offers its server-side catalogue)
        assert "tools" not in sent and "parallel_tool_calls" not in sent


@pytest.mark.parametrize(("extra", "code", "param"), REFUSED, ids=[r[2] for r in REFUSED])
def test_refused_value_gets_400_naming_it(gw: tuple[str, str, FakeChatCompletionsServer], extra: dict[str, Any],
                                          code: str, param: str) -> None:
    url, _, fake = gw
    r = _post(url, {"input": "Say hi.", "model": "fake-model", **extra})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["code"], error["param"]) == (code, param), error
    assert fake.requests == []  # nothing reached the model


def test_an_unknown_field_is_ignored(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    # DESIGN §4: fields nobody defines are accepted and reported (test_field_policy.py), never sent upstream.
    url, dialect, fake = gw
    _stream(url, dialect, {"frobnicate": True})
    assert "frobnicate" not in fake.requests[-1]


def test_echo_carries_the_fields_as_used(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, _ = gw
    d = _stream(url, dialect, {"top_p": 0.5, "presence_penalty": 0.75, "frequency_penalty": -0.5, "top_logprobs": 2,
                               "reasoning": {"effort": "low"}, "max_tool_calls": 3, "truncation": "auto",
                               "prompt_cache_key": "k1", "safety_identifier": "s1", "service_tier": "flex",
                               "text": {"verbosity": "high"}})
    terminal = d.payloads()[-1]
    response = terminal.get("response", terminal)
    expected = {"top_p": 0.5, "presence_penalty": 0.75, "frequency_penalty": -0.5, "top_logprobs": 2,
                "max_tool_calls": 3, "truncation": "auto", "prompt_cache_key": "k1", "safety_identifier": "s1"}
    assert {k: response.get(k) for k in expected} == expected
    assert response["reasoning"]["effort"] == "low"
    assert response["text"] == {"format": {"type": "text"}, "verbosity": "high"}


# -- fields the gateway implements -------------------------------------------------------------------------------------
def test_previous_response_id_chains_the_context(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(text("I am Ada."), finish(), Done())
    first = _stream(url, dialect, {"input": "My name is Ada."})
    fake.script(text("Ada."), finish(), Done())
    _stream(url, dialect, {"input": "What is my name?", "previous_response_id": first.core.result.response_id})
    contents = [m["content"] for m in fake.requests[-1]["messages"]]
    assert contents == ["My name is Ada.", "I am Ada.", "What is my name?"]


def test_metadata_limits_are_openai_s(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, _ = gw
    ok = {f"k{i}": "v" * 512 for i in range(16)} | {"k" * 64: "x"}
    ok.pop("k0")
    d = _stream(url, dialect, {"metadata": ok})
    terminal = d.payloads()[-1]
    assert terminal.get("response", terminal)["metadata"] == ok
    for bad, param in (({f"k{i}": "v" for i in range(17)}, "metadata"), ({"k" * 65: "v"}, "metadata." + "k" * 65),
                       ({"a": "v" * 513}, "metadata.a"), ({"a": 1}, "metadata.a")):
        r = _post(url, {"input": "x", "metadata": bad})
        assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_stream_false_returns_the_response_json(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, _, fake = gw
    fake.script(text("Hello"), finish(), Done())
    r = _post(url, {"input": "Say hi.", "model": "fake-model", "stream": False})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["status"] == "completed"


def test_stream_options_obfuscation(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    # false is what the gateway does anyway (no padding on deltas); true is refused in REFUSED above.
    d = _stream(url, dialect, {"stream_options": {"include_obfuscation": False}})
    deltas = [p for p in d.payloads() if p["type"].endswith(".delta")]
    assert deltas and all("obfuscation" not in p for p in deltas)
    assert "stream_options" in fake.requests[-1]  # the gateway's own include_usage, not the client's field
    assert fake.requests[-1]["stream_options"] == {"include_usage": True}


def test_background_runs_and_is_retrievable(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, _, fake = gw
    fake.script(text("Later"), finish(), Done())
    r = _post(url, {"input": "Say hi.", "model": "fake-model", "background": True, "stream": False})
    assert r.status_code == 200, r.text
    rid = r.json()["id"]
    with httpx.Client(timeout=20) as client:
        for _ in range(200):
            got = client.get(f"{url}/v1/responses/{rid}").json()
            if got["status"] in ("completed", "failed"):
                break
            time.sleep(0.05)
    assert got["status"] == "completed"


def test_max_tool_calls_bounds_the_calls(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    # The model asks for three calls at once; max_tool_calls 2 keeps the first two, never a third.
    fake.script(tool(0, id="c1", name="get_weather", args='{"city": "A"}'),
                tool(1, id="c2", name="get_weather", args='{"city": "B"}'),
                tool(2, id="c3", name="get_weather", args='{"city": "C"}'), finish("tool_calls"), Done())
    d = _stream(url, dialect, {"tools": [WEATHER], "max_tool_calls": 2})
    calls = [o for o in d.core.result.output if o["type"] == "function_call"]
    assert [c["call_id"] for c in calls] == ["c1", "c2"]


def test_parallel_tool_calls_false_keeps_one_call(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(tool(0, id="c1", name="get_weather", args='{"city": "A"}'),
                tool(1, id="c2", name="get_weather", args='{"city": "B"}'), finish("tool_calls"), Done())
    d = _stream(url, dialect, {"tools": [WEATHER], "parallel_tool_calls": False})
    assert [o["call_id"] for o in d.core.result.output if o["type"] == "function_call"] == ["c1"]
    assert fake.requests[-1]["parallel_tool_calls"] is False


def test_truncation_disabled_is_a_400_and_auto_drops_the_oldest_turns(
    gw: tuple[str, str, FakeChatCompletionsServer],
) -> None:
    url, dialect, fake = gw
    old = [{"role": "user", "content": f"old turn {i} " + "word " * 200} for i in range(8)]
    body = {"model": "fake-model", "input": [*old, {"role": "user", "content": "the question"}]}
    r = _post(url, body)  # truncation defaults to disabled
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "context_length_exceeded" and str(WINDOW) in error["message"]
    assert fake.requests == []
    _stream(url, dialect, {**body, "truncation": "auto", "instructions": "Be brief."})
    messages = fake.requests[-1]["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}  # instructions stay
    assert messages[-1]["content"] == "the question"  # the newest turn stays
    assert 1 < len(messages) < len(old) + 2  # some of the oldest went
    kept = [m["content"] for m in messages[1:-1]]
    assert kept == [m["content"] for m in old[len(old) - len(kept):]]  # what went is the oldest
    huge = {"model": "fake-model", "truncation": "auto", "input": "word " * 5000}
    r = _post(url, huge)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_store_false_keeps_nothing(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, _ = gw
    d = _stream(url, dialect, {"store": False})
    rid = d.core.result.response_id
    with httpx.Client(timeout=20) as client:
        assert client.get(f"{url}/v1/responses/{rid}").status_code == 404
        r = client.post(f"{url}/v1/responses", json={"input": "x", "model": "fake-model", "store": False,
                                                       "stream": False})
        assert r.status_code == 200 and r.json()["status"] == "completed"
        assert client.get(f"{url}/v1/responses/{r.json()['id']}").status_code == 404
    # Nothing kept: once the stream has ended the record is deleted, so it cannot be chained either (the
    # deletion runs just after the stream closes: allow it a moment).
    for _ in range(40):
        r = _post(url, {"input": "x", "model": "fake-model", "previous_response_id": rid})
        if r.status_code == 400:
            break
        time.sleep(0.05)
    assert r.status_code == 400 and r.json()["error"]["code"] == "previous_response_not_found"


# -- tool selection ---------------------------------------------------------------------------------------------------
def test_allowed_tools_offers_only_those(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    other = {**WEATHER, "name": "get_time"}
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_weather"}]}
    # The model calls a tool it was not offered: that call is never passed on as a client call, nor run.
    fake.script(tool(0, id="c9", name="get_time", args="{}"), finish("tool_calls"), Done())
    fake.script(text("ok"), finish(), Done())
    d = _stream(url, dialect, {"tools": [WEATHER, other], "tool_choice": choice})
    sent = fake.requests[0]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert sent["tool_choice"] == "required"
    stray = [o for o in d.core.result.output if o.get("name") == "get_time"]
    assert all(o["status"] == "failed" and "unknown tool" in str(o.get("output") or o.get("error")) for o in stray)
    assert d.core.result.output_text == "ok" and d.core.result.status == "completed"


def test_only_listed_server_tools_run_outside_platform(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(tool(0, id="c1", name="get_weather", args='{"city": "San Francisco"}'), finish("tool_calls"), Done())
    d = _stream(url, dialect, {"model": "auto", "input": "What's the weather in San Francisco?", "tools": [WEATHER]})
    kinds = [o["type"] for o in d.core.result.output]
    offered = [t["function"]["name"] for t in fake.requests[0]["tools"]]
    if dialect == "platform":  # the seed's server-side catalogue: every server tool is offered
        assert "get_weather" in offered and len(offered) > 1
    else:
        assert offered == ["get_weather"] and kinds == ["function_call"]
        assert len(fake.requests) == 1


def test_a_forced_schema_turns_server_tools_off(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(text('{"name": "Ada", "age": 36}'), finish(), Done())
    _stream(url, dialect, {"model": "auto", "input": "What is 17 * 23? Answer as a person.",
                           "text": {"format": JSON_SCHEMA_FORMAT}})
    assert "tools" not in fake.requests[-1] and len(fake.requests) == 1


# -- model aliases and modalities -------------------------------------------------------------------------------------
def test_aliases_resolve_and_are_listed(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    _stream(url, dialect, {"model": "gpt-4o-mini"})
    _stream(url, dialect, {"model": "my-model"})
    assert fake.requests[-1]["model"] == "fake-model"
    with httpx.Client(timeout=10) as client:
        data = {m["id"]: m for m in client.get(f"{url}/v1/models").json()["data"]}
    assert data["gpt-4o-mini"]["alias_for"] == "auto" and data["my-model"]["alias_for"] == "fake-model"
    assert data["fake-model"]["input_modalities"] == ["text", "image", "file"]


def test_image_and_file_parts_are_forwarded(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    data_url = "data:image/png;base64,iVBORw0KGgo="
    content = [{"type": "input_text", "text": "What is this?"},
               {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"},
               {"type": "input_image", "image_url": data_url},
               {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}]
    _stream(url, dialect, {"input": [{"role": "user", "content": content}]})
    assert fake.requests[-1]["messages"][-1] == {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": data_url, "detail": "auto"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}}]}


def test_structured_output_invalid_answer_fails(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(text('{"name": "Ada", "age": "old"}'), finish(), Done())
    d = _stream(url, dialect, {"text": {"format": JSON_SCHEMA_FORMAT}})
    result = d.core.result
    assert result.status in ("failed", "error") and result.error is not None  # platform's terminal is `error`
    assert result.error["code"] == "invalid_structured_output"
    assert "$.age" in result.error["message"]
    fake.script(text('not json'), finish(), Done())
    d = _stream(url, dialect, {"text": {"format": {"type": "json_object"}}})
    assert d.core.result.error is not None and "not valid JSON" in d.core.result.error["message"]
    assert fake.requests[-1]["response_format"] == {"type": "json_object"}


def test_structured_output_valid_answer_completes(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(text('{"name": '), text('"Ada", "age": 36}'), finish(), Done())
    d = _stream(url, dialect, {"text": {"format": JSON_SCHEMA_FORMAT}})
    assert d.core.result.status == "completed"
    assert json.loads(d.core.result.output_text) == {"name": "Ada", "age": 36}


def test_a_part_the_model_does_not_take_is_a_400_naming_part_model_and_modalities(
    fake: FakeChatCompletionsServer,
) -> None:
    fake.reset(default_script=True)
    config = Config(dialect="openai", upstreams=[fake.url], upstream_options={"retries": 0})  # text only (default)
    content = [{"type": "input_text", "text": "What is this?"},
               {"type": "input_image", "image_url": "https://example.com/cat.png"}]
    with ServerThread(create_app(config)) as server:
        r = _post(server.url, {"model": "fake-model", "input": [{"role": "user", "content": content}]})
        with httpx.Client(timeout=10) as client:
            listed = {m["id"]: m for m in client.get(f"{server.url}/v1/models").json()["data"]}
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_parameter", "input[0].content[1]")
    assert "input_image" in error["message"] and "fake-model" in error["message"] and "text" in error["message"]
    assert fake.requests == []
    assert listed["fake-model"]["input_modalities"] == ["text"] and listed["auto"]["input_modalities"] == ["text"]


def _logprob_chunk(token: str, logprob: float) -> Chunk:
    entry = {"token": token, "logprob": logprob, "bytes": list(token.encode()),
             "top_logprobs": [{"token": token, "logprob": logprob, "bytes": list(token.encode())}]}
    return Chunk({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": token}, "logprobs": {"content": [entry]}, "finish_reason": None}]})


def test_top_logprobs_come_back_on_the_deltas_and_the_part(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(_logprob_chunk("Hel", -0.25), _logprob_chunk("lo", -0.5), finish(), Done())
    d = _stream(url, dialect, {"top_logprobs": 1})
    deltas = [p for p in d.payloads() if p["type"] == "response.output_text.delta"]
    assert [[e["logprob"] for e in p["logprobs"]] for p in deltas] == [[-0.25], [-0.5]]
    assert deltas[0]["logprobs"][0]["top_logprobs"][0]["token"] == "Hel"
    done = next(p for p in d.payloads() if p["type"] == "response.output_text.done")
    assert [e["token"] for e in done["logprobs"]] == ["Hel", "lo"]
    message = next(o for o in d.core.result.output if o["type"] == "message")
    assert [e["token"] for e in message["content"][0]["logprobs"]] == ["Hel", "lo"]
    assert d.core.result.output_text == "Hello"


def test_max_tool_calls_also_bounds_server_tool_rounds(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    # Round 1 calls the (real) calculator; with max_tool_calls 1 round 2 is offered no tools at all.
    fake.script(tool(0, id="c1", name="calculator", args='{"expression": "2+2"}'), finish("tool_calls"), Done())
    fake.script(text("It is 4."), finish(), Done())
    d = _stream(url, dialect, {"input": "2+2?", "tools": [{"type": "calculator"}], "max_tool_calls": 1})
    assert len(fake.requests) == 2
    assert [t["function"]["name"] for t in fake.requests[0]["tools"]] == ["calculator"]
    assert "tools" not in fake.requests[1]  # the budget is spent: nothing more is offered
    assert fake.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "4"}
    assert d.core.result.output_text == "It is 4."


def test_forcing_a_hosted_tool_enables_it(gw: tuple[str, str, FakeChatCompletionsServer]) -> None:
    url, dialect, fake = gw
    fake.script(tool(0, id="c1", name="calculator", args='{"expression": "2+2"}'), finish("tool_calls"), Done())
    fake.script(text("4"), finish(), Done())
    _stream(url, dialect, {"input": "2+2?", "tool_choice": {"type": "calculator"}})
    first = fake.requests[0]
    assert "calculator" in [t["function"]["name"] for t in first["tools"]]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert fake.requests[1]["tool_choice"] == "auto"  # forced once: the next round may answer
    r = _post(url, {"input": "x", "tool_choice": {"type": "calculator"}, "text": {"format": {"type": "json_object"}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"


PDF = b"%PDF-1.4 simulated file for the file_url test"


async def _file_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """SIMULATED file host on loopback: GET /docs/a.pdf -> PDF bytes."""
    if scope["type"] != "http":
        return
    found = scope["path"] == "/docs/a.pdf"
    await send({"type": "http.response.start", "status": 200 if found else 404,
                "headers": [(b"content-type", b"application/pdf")]})
    await send({"type": "http.response.body", "body": PDF if found else b""})


def test_file_url_is_fetched_through_the_network_policy(fake: FakeChatCompletionsServer) -> None:
    fake.reset(default_script=True)
    modalities = {"input_modalities": {"fake-model": ["text", "file"]}}
    with ServerThread(_file_app, lifespan="off") as files:
        part = {"type": "input_file", "file_url": f"{files.url}/docs/a.pdf"}
        body = {"model": "fake-model", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "Summarise."}, part]}]}
        # Default policy: a loopback address is refused (as web_fetch refuses it), named on the part.
        closed = Config(dialect="openai", upstreams=[fake.url], upstream_options={"retries": 0}, models=modalities)
        with ServerThread(create_app(closed)) as gw:
            r = _post(gw.url, body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "input[0].content[1].file_url"
        assert "127.0.0.1" in r.json()["error"]["message"] and fake.requests == []
        # Allowed by [tools] fetch_allow: fetched and sent inline as file_data.
        allowed = Config(dialect="openai", upstreams=[fake.url], upstream_options={"retries": 0}, models=modalities,
                         tools={"fetch_allow": ["127.0.0.1"]})
        with ServerThread(create_app(allowed)) as gw:
            d = post_stream(gw.url, body, dialect="openai")
            missing = _post(gw.url, {**body, "input": [{"role": "user", "content": [
                {"type": "input_file", "file_url": f"{files.url}/docs/none.pdf"}]}]})
    assert d.status_code == 200 and d.violations == []
    sent = fake.requests[-1]["messages"][-1]["content"][1]
    encoded = base64.b64encode(PDF).decode()
    assert sent == {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{encoded}",
                                             "filename": "a.pdf"}}
    assert missing.status_code == 400 and "HTTP 404" in missing.json()["error"]["message"]
