"""The rewrite pass: default rewriters, opt-in model rewriters (with a SIMULATED upstream), config, robustness."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from respstream.server.responses.rewrite import (
    LanguageAlignment,
    Rewriter,
    SpellingFix,
    normalise_whitespace,
    strip_think,
    strip_tool_markup,
)
from respstream.server.upstream.base import Chunk, Finish, GenerationRequest, TextDelta, UpstreamError

MARKUP = [
    ('Sure.<tool_call>{"name": "x", "arguments": {}}</tool_call> Done', "Sure. Done"),
    ('Answer <tool_call>{"name": "x"', "Answer "),
    ('Hi [TOOL_CALLS][{"name": "f", "arguments": {"a": "]"}}] there', "Hi  there"),
    ("Hi [TOOL_CALLS] call f\nnext line", "Hi \nnext line"),
    ('<|tool_call|>{"name": "g"}\nText', "\nText"),
    ('<|python_tag|>{"name": "h", "parameters": {}}', ""),
    ('<function=get_weather>{"city": "Paris"}</function>Sunny', "Sunny"),
    ("a < b and c > d", "a < b and c > d"),
]


@pytest.mark.parametrize(("text", "expected"), MARKUP, ids=[m[0][:30] for m in MARKUP])
def test_strip_tool_markup(text: str, expected: str) -> None:
    assert strip_tool_markup(text) == expected


def test_strip_think_and_whitespace() -> None:
    assert strip_think("<think>plan</think>Answer") == "Answer"
    assert strip_think("Answer</think> more") == "Answer more"
    assert strip_think("Answer <think>never closed") == "Answer "
    assert normalise_whitespace("  a  \n\n\n\n b\t\r\n c  \n") == "a\n\n b\n c"


async def test_default_pass_and_unchanged_identity() -> None:
    rewriter = Rewriter()
    assert rewriter.names == ["strip_tool_markup", "strip_think", "whitespace"]
    clean = "Paris is the capital of France.\n\nIt has 2.1 million inhabitants."
    assert await rewriter.rewrite(clean) is clean
    dirty = '<think>hmm</think>Paris.  \n\n\n\n<tool_call>{"name":"x"}</tool_call>\n'
    assert await rewriter.rewrite(dirty) == "Paris."
    assert await Rewriter([]).rewrite(dirty) == dirty
    assert await Rewriter({"steps": []}).rewrite(dirty) == dirty


class Echo:
    """SIMULATED upstream for rewrite tests: answers with a fixed text, or fails."""

    name = "echo"
    models = ["echo-model"]

    def __init__(self, answer: str = "", fail: bool = False) -> None:
        self.answer = answer
        self.fail = fail
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        self.requests.append(request)
        if self.fail:
            raise UpstreamError("upstream_unavailable", "down")
        for word in self.answer.split(" "):
            yield TextDelta(word + " ")
        yield Finish()

    async def aclose(self) -> None:
        return None


async def test_language_alignment() -> None:
    echo = Echo("Parijs is de hoofdstad van Frankrijk.")
    step = LanguageAlignment(echo)
    rewriter = Rewriter(["strip_think", step])
    source = "Paris is the capital of France."
    assert await rewriter.rewrite(source) == source and echo.requests == [], "no language: no model call"
    assert await rewriter.rewrite(source, language="nl") == "Parijs is de hoofdstad van Frankrijk."
    request = echo.requests[0]
    assert request.model == "echo-model" and "'nl'" in request.messages[0]["content"]
    assert request.messages[1] == {"role": "user", "content": source}


async def test_model_steps_keep_input_on_failure_or_nonsense() -> None:
    source = "Teh answer is fourty two."
    assert await Rewriter([SpellingFix(Echo(fail=True))]).rewrite(source) is source
    rambling = Echo("Sure! Here is a very long essay about numbers " * 10)
    assert await Rewriter([SpellingFix(rambling)]).rewrite(source) is source
    assert await Rewriter([SpellingFix(Echo("The answer is forty two."))]).rewrite(source) == "The answer is forty two."


async def test_broken_step_is_skipped() -> None:
    class Broken:
        name = "broken"

        async def __call__(self, text: str, language: str | None) -> str:
            raise RuntimeError("bug")

    assert await Rewriter([Broken(), "whitespace"]).rewrite(" x ") == "x"


async def test_config_builds_model_steps_lazily() -> None:
    built: list[str] = []

    def factory(spec: str) -> Echo:
        built.append(spec)
        return Echo("Bonjour tout le monde.")

    rewriter = Rewriter(
        {"language_alignment": True, "language": "fr", "upstream": "scripted:3"}, upstream_factory=factory
    )
    assert rewriter.names[-3:] == ["language_alignment", "strip_tool_markup", "whitespace"]
    assert built == [], "nothing built until used"
    assert await rewriter.rewrite("Hello everyone, all of you.") == "Bonjour tout le monde."
    assert built == ["scripted:3"]
    with pytest.raises(ValueError, match="unknown rewrite config"):
        Rewriter({"stepz": []})
    with pytest.raises(ValueError, match="unknown rewrite step"):
        Rewriter(["spellcheck"])
