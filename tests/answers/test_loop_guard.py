"""The loop guard ends degenerate answers early and leaves ordinary ones alone (server/upstream/chat/loop_guard.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from respstream.server.upstream.base import Chunk, Finish, ReasoningDelta, TextDelta
from respstream.server.upstream.chat.loop_guard import LoopGuard, guard_stream


def feed_words(guard: LoopGuard, text: str) -> tuple[str | None, int]:
    fed = 0
    for word in text.split(" "):
        fed += len(word) + 1
        if guard.feed(word + " ") is not None:
            return guard.reason, fed
    return None, fed


def test_one_sentence_over_and_over_is_caught_early() -> None:
    reason, fed = feed_words(LoopGuard(), "The dragon flew over the mountain and breathed fire. " * 50)
    assert reason is not None and "repeats" in reason and fed < 400


def test_a_token_loop_without_punctuation_is_caught() -> None:
    reason, fed = feed_words(LoopGuard(), "and then " * 500)
    assert reason is not None and fed < 400


def test_a_two_sentence_cycle_is_caught() -> None:
    text = "The knight rode north to the castle. The dragon slept in its cave all winter. " * 20
    reason, _ = feed_words(LoopGuard(), text)
    assert reason is not None


def test_ordinary_long_text_and_code_are_left_alone() -> None:
    story = " ".join(f"On day {n} the dragon visited village {n * 7} and met {n + 3} farmers." for n in range(200))
    assert feed_words(LoopGuard(), story)[0] is None
    code = "```python\n" + "".join("    self.assertEqual(result, expected)\n" for _ in range(6)) + "```\n"
    guard = LoopGuard()
    assert guard.feed(code) is None
    table = "| a | b |\n|---|---|\n" + "".join(f"| {i} | {i * i} |\n" for i in range(100))
    assert LoopGuard().feed(table) is None


def test_cost_stays_linear() -> None:
    text = "".join(f"Sentence number {i} is different from the others. " for i in range(4000))  # ~200 KB
    guard = LoopGuard()
    start = time.perf_counter()
    for i in range(0, len(text), 4):
        guard.feed(text[i:i + 4])
    half = time.perf_counter() - start
    guard2 = LoopGuard()
    start = time.perf_counter()
    for i in range(0, len(text) // 2, 4):
        guard2.feed(text[i:i + 4])
    quarter = time.perf_counter() - start
    assert guard.reason is None and half < quarter * 4  # doubling the input at most ~doubles the time (slack 2x)


async def test_guard_stream_ends_with_repetition_and_closes_the_source() -> None:
    closed = []

    async def source() -> AsyncIterator[Chunk]:
        try:
            for _ in range(10_000):
                yield TextDelta("All work and no play makes Jack a dull boy. ")
            yield Finish("stop")
        finally:
            closed.append(True)

    out = [c async for c in guard_stream(source(), LoopGuard())]
    assert isinstance(out[-1], Finish) and out[-1].reason == "repetition" and len(out) < 20 and closed == [True]


async def test_a_stopped_loop_reports_the_tokens_it_streamed() -> None:
    # Issue 31: stopping early loses the upstream's usage chunk; the response reported 0 output tokens after
    # a thousand. Every generated chunk (one token each from a llama.cpp-style server) counts, the one that showed
    # the loop included; the prompt's count comes from the server's tokenizer when it has one.
    async def source() -> AsyncIterator[Chunk]:
        yield ReasoningDelta("thinking")
        for _ in range(10_000):
            for word in ["All", "work", "and", "no", "play", "makes", "Jack", "a", "dull", "boy.", ""]:
                yield TextDelta(word + " ")
        yield Finish("stop")

    asked: list[bool] = []

    async def count_input() -> int | None:
        asked.append(True)
        return 321

    out = [c async for c in guard_stream(source(), LoopGuard(), input_tokens=7, count_input=count_input)]
    finish = out[-1]
    assert isinstance(finish, Finish) and finish.reason == "repetition" and finish.usage is not None
    passed = sum(1 for c in out if isinstance(c, TextDelta | ReasoningDelta))
    assert finish.usage.output_tokens == passed + 1 > 20  # what went out, and the delta that showed the loop
    assert finish.usage.input_tokens == 321 and asked == [True]

    async def no_count() -> int | None:
        return None

    out = [c async for c in guard_stream(source(), LoopGuard(), input_tokens=7, count_input=no_count)]
    assert out[-1].usage is not None and out[-1].usage.input_tokens == 7  # type: ignore[union-attr]


def test_a_sentence_said_three_times_is_a_loop() -> None:
    text = "Het getal 4711 is een interessant getal. Dit maakt het een interessant onderwerp voor astronomie. " * 3
    reason, _ = feed_words(LoopGuard(), text)
    assert reason is not None and "3 times" in reason
