"""The pure half of "ground first": which server tool runs before the model, with which arguments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from respstream.server.routing.router import arithmetic_expression, classify, ground_first, time_zone_in


@pytest.mark.parametrize(("text", "expression"), [
    ("What is 17 * 23?", "17 * 23"),
    ("what's 2^10 + (3*4)?", "2^10 + (3*4)"),
    ("How much is sqrt(2)?", "sqrt(2)"),
    ("Compute 12.5 / 4.", "12.5 / 4"),
    ("Hello", None),
    ("Is 2026-11-29 a Friday?", None),
    ("I have 3 apples and 2 pears", None),
    ("What is 7?", None),
])  # fmt: skip
def test_arithmetic_expression(text: str, expression: str | None) -> None:
    assert arithmetic_expression(text) == expression


def test_time_zone_from_a_city_name() -> None:
    assert time_zone_in("What time is it now in Amsterdam?") == "Europe/Amsterdam"
    assert time_zone_in("current time in new york please") == "America/New_York"
    assert time_zone_in("What day is it?") == "UTC"


def test_ground_first_picks_the_tool_from_input_and_route() -> None:
    assert ground_first("What is 17 * 23?", "reasoning") == ("calculator", {"expression": "17 * 23"})
    assert ground_first("what day is it today", "retrieval") == ("current_datetime", {"timezone": "UTC"})
    assert ground_first("the latest news", "retrieval") == ("web_search", {"query": "latest news"})  # stop words out
    assert ground_first("read https://example.org/a.", "retrieval") == ("web_fetch", {"url": "https://example.org/a"})
    assert ground_first("the latest news", "fast") is None
    assert ground_first("What is 17 * 23?", "pinned") is None
    assert classify("What time is it in Amsterdam?")[1].endswith("; current_datetime first")


def _arithmetic_unguarded(text: str) -> str | None:
    """arithmetic_expression without its whole-text operation guard: the reference the guard must agree with."""
    from respstream.server.routing import classify as c

    if len(text) > 4000:
        return None
    text = c.spoken_to_expression(text)
    for span in sorted((m.group(0).strip() for m in c._ARITH_SPAN.finditer(text)), key=len, reverse=True):
        span = span.rstrip(".").strip()
        if not c._OPERATION.search(span) or c._DATE_LIKE.match(span):
            continue
        try:
            c.evaluate(span)
        except (c.CalculatorError, ArithmeticError, ValueError, TypeError, RecursionError):
            continue
        return span
    return None


_ARITH_WORDS = st.lists(st.sampled_from(["12", "3.5", "(", ")", " ", "+", "*", "**", "-", "sqrt", "asqrt", "pi",
                                         "xpi", "times", "percent of", "2026-11-29", ".", "hello", "x", "log(",
                                         "\t", "٣"]), max_size=10)


@settings(max_examples=500, deadline=None)
@given(words=_ARITH_WORDS, glue=st.sampled_from(["", " "]))
def test_arithmetic_guard_changes_nothing(words: list[str], glue: str) -> None:
    text = glue.join(words)
    assert arithmetic_expression(text) == _arithmetic_unguarded(text)
