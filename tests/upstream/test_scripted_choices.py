"""The SIMULATED scripted backend: when ``tool=NAME`` calls a tool, and the ``text=`` option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from respstream.server.tools import ToolRegistry
from respstream.server.tools.specs import TOOL_NAMES, TOOL_SPECS, is_server_tool_spec
from respstream.server.upstream.base import (
    Chunk,
    Finish,
    GenerationRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
)
from respstream.server.upstream.factory import build_upstream
from respstream.server.upstream.scripted import ScriptedUpstream, parse_scripted_spec, split_text

USER: list[dict[str, Any]] = [{"role": "user", "content": "what is new in respstream?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


async def run(upstream: ScriptedUpstream, request: GenerationRequest) -> list[Chunk]:
    return [chunk async for chunk in upstream.generate(request)]


def call_of(chunks: list[Chunk]) -> tuple[str | None, str]:
    calls = [c for c in chunks if isinstance(c, ToolCallDelta)]
    return (calls[0].name if calls else None), "".join(c.arguments for c in calls)


def text_of(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    # An empty corpus folder keeps the embedded search index tiny and local to the test.
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "doc.md").write_text("# respstream\nrespstream streams responses.\n")
    return ToolRegistry({"index_path": str(tmp_path / "idx.db"), "corpus": str(tmp_path / "corpus")})


@pytest.mark.parametrize("name", ["calculator", "web_search", "current_datetime"])
async def test_offered_server_tool_gets_arguments_the_real_tool_accepts(name: str, registry: ToolRegistry) -> None:
    # The gateway offers every enabled server tool next to the client's tools, as the pipeline does.
    upstream = ScriptedUpstream.from_spec(f"scripted:2?tool={name}")
    request = GenerationRequest(model="scripted", messages=USER, tools=[*registry.specs(), WEATHER])
    chunks = await run(upstream, request)
    called, arguments = call_of(chunks)
    assert called == name
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "tool_calls"
    result = await registry.run(name, arguments)
    assert result.status == "completed", result.output
    if name == "calculator":
        assert json.loads(arguments) == {"expression": "2+2"} and result.output == "4"
    if name == "web_search":
        assert json.loads(arguments) == {"query": "what is new in respstream?"}


async def test_web_fetch_arguments_are_a_url(registry: ToolRegistry) -> None:
    upstream = ScriptedUpstream.from_spec("scripted:2?tool=web_fetch")
    chunks = await run(upstream, GenerationRequest(model="scripted", messages=USER, tools=registry.specs()))
    called, arguments = call_of(chunks)
    assert called == "web_fetch" and json.loads(arguments) == {"url": "https://example.com/"}


async def test_client_function_tool_gets_schema_arguments() -> None:
    upstream = ScriptedUpstream.from_spec("scripted:2?tool=get_weather")
    request = GenerationRequest(model="scripted", messages=USER, tools=[TOOL_SPECS["calculator"], WEATHER])
    called, arguments = call_of(await run(upstream, request))
    assert called == "get_weather" and json.loads(arguments) == {"city": "example"}


async def test_client_tool_named_like_a_disabled_server_tool_follows_its_own_schema() -> None:
    mine = {
        "type": "function",
        "function": {
            "name": "calculator",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        },
    }
    assert not is_server_tool_spec(mine) and is_server_tool_spec(TOOL_SPECS["calculator"])
    upstream = ScriptedUpstream.from_spec("scripted:2?tool=calculator")
    called, arguments = call_of(await run(upstream, GenerationRequest(model="s", messages=USER, tools=[mine])))
    assert called == "calculator" and json.loads(arguments) == {"a": 1}


@pytest.mark.parametrize(
    ("name", "tools", "tool_choice"),
    [
        ("get_weather", [], None),  # a client tool the request does not offer
        ("calculator", [], None),  # tools not offered (last round, or server tools disabled)
        ("calculator", [TOOL_SPECS["web_search"], WEATHER], None),  # other tools offered, not this one
        ("made_up", [WEATHER, *TOOL_SPECS.values()], None),  # neither offered nor a server tool
        ("calculator", [TOOL_SPECS["calculator"]], "none"),  # offered, but the caller said no tools
    ],
    ids=["client-not-offered", "nothing-offered", "others-offered", "unknown", "tool_choice-none"],
)
async def test_no_call_when_the_tool_is_not_offered(name: str, tools: list[dict[str, Any]], tool_choice: Any) -> None:
    upstream = ScriptedUpstream.from_spec(f"scripted:3?tool={name}")
    request = GenerationRequest(model="scripted", messages=USER, tools=tools, tool_choice=tool_choice)
    chunks = await run(upstream, request)
    assert call_of(chunks) == (None, "")
    assert text_of(chunks) == "The quick brown"
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "stop"


def test_every_server_tool_has_a_spec() -> None:
    assert set(TOOL_SPECS) == set(TOOL_NAMES)
    assert all(is_server_tool_spec(spec) for spec in TOOL_SPECS.values())
    assert not is_server_tool_spec({"type": "function"}) and not is_server_tool_spec("calculator")


# -- text= --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts", "expected"),
    [
        ("abcdefg", 3, ["abc", "de", "fg"]),
        ("ab", 5, ["a", "b"]),
        ("one  two\nthree ", 0, ["one", "  two", "\nthree "]),
        ("  ", 0, ["  "]),
        ("", 4, []),
        ("<img src=x onerror=alert(1)>", 0, ["<img", " src=x", " onerror=alert(1)>"]),
    ],
)
def test_split_text(text: str, parts: int, expected: list[str]) -> None:
    pieces = split_text(text, parts)
    assert pieces == expected and "".join(pieces) == text


async def test_text_option_streams_exactly_that_text_in_n_deltas() -> None:
    # "+" is a space and %XX is decoded, as in any URL query.
    upstream = build_upstream("scripted:4?text=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E+**bold**")
    assert isinstance(upstream, ScriptedUpstream)
    chunks = await run(upstream, GenerationRequest(model="scripted", messages=USER))
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    assert len(deltas) == 4
    assert text_of(chunks) == "<img src=x onerror=alert(1)> **bold**"
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop" and finish.usage is not None
    assert finish.usage.output_tokens == 4


@pytest.mark.parametrize("spec", ["scripted?text=a+b%0Ac", "scripted:0?text=a+b%0Ac"])
async def test_text_without_n_is_split_into_words(spec: str) -> None:
    chunks = await run(ScriptedUpstream.from_spec(spec), GenerationRequest(model="scripted", messages=USER))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["a", " b", "\nc"]


async def test_text_keeps_the_other_options_working() -> None:
    spec = "scripted:3?text=hello+there+world&reasoning=1&fail_at=2"
    got: list[Chunk] = []
    with pytest.raises(UpstreamError):
        async for chunk in ScriptedUpstream.from_spec(spec).generate(GenerationRequest(model="s", messages=USER)):
            got.append(chunk)
    assert got[0] == ReasoningDelta("thinking") and text_of(got) == "hello there "

    upstream = ScriptedUpstream.from_spec("scripted?text=the+answer&tool=calculator&delay_ms=1")
    offered = [TOOL_SPECS["calculator"]]
    first = await run(upstream, GenerationRequest(model="s", messages=USER, tools=offered))
    assert call_of(first)[0] == "calculator"
    after_tool = [*USER, {"role": "assistant", "tool_calls": []}, {"role": "tool", "tool_call_id": "c", "content": "4"}]
    second = await run(upstream, GenerationRequest(model="s", messages=after_tool, tools=offered))
    assert text_of(second) == "the answer"

    limited = await run(ScriptedUpstream.from_spec("scripted?text=a+b+c"), GenerationRequest(
        model="s", messages=USER, max_output_tokens=2))
    assert text_of(limited) == "a b" and isinstance(limited[-1], Finish) and limited[-1].reason == "length"


def test_text_option_parses_and_keeps_empty_text() -> None:
    assert parse_scripted_spec("scripted:2?text=x%26y%3Dz") == {"deltas": 2, "text": "x&y=z"}
    empty = ScriptedUpstream.from_spec("scripted:3?text=")
    assert empty.text == "" and empty.deltas == 0
