"""What an input is about, without IO: the routing category of a ``model: "auto"`` request (:func:`classify`, pure:
text + :class:`RoutingRules` -> category and a human reason such as ``"Input length > 500 tokens"``), and the inputs a
server tool should answer before the model does (:func:`ground_first`: arithmetic, the time in a zone, a URL or a
search). Every pattern here is linear in the input (no nested quantifiers);
:class:`~respstream.server.routing.router.Router` maps the category to models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from respstream.server.routing.url_scan import find_url
from respstream.server.tools.arith_words import spoken_to_expression
from respstream.server.tools.calculator import CalculatorError, evaluate
from respstream.server.tools.place_zones import time_zone_in
from respstream.server.tools.search_query import search_query

__all__ = ["CATEGORIES", "RoutingRules", "arithmetic_expression", "asks_for_length", "classify", "estimate_tokens",
           "ground_first", "time_zone_in"]


CATEGORIES = ("fast", "reasoning", "retrieval", "code")

_REASONING = (
    "why", "explain", "prove", "proof", "derive", "step by step", "analyse", "analyze", "compare", "reason",
    "calculate", "solve", "evaluate", "trade-off", "tradeoff", "pros and cons", "plan", "design", "strategy",
    "waarom", "leg uit", "warum", "erkläre", "pourquoi", "explique",
    "bereken", "uitrekenen", "hoeveel is", "berechne", "wie viel ist", "wieviel ist", "calcule", "combien font",
)  # fmt: skip
_RETRIEVAL = (
    "today", "tonight", "yesterday", "tomorrow", "this week", "this month", "this year", "latest", "recent",
    "recently", "current", "currently", "news", "now", "right now", "weather", "price", "stock", "score",
    "who won", "released", "search", "look up", "find out", "date", "what time", "vandaag", "nieuws", "heute",
    "aktuell", "aujourd'hui",
    "hoe laat", "nu", "actueel", "zoek", "wie spät", "uhrzeit", "jetzt", "nachrichten", "suche",
    "quelle heure", "maintenant", "actualités", "cherche",
)  # fmt: skip
_CODE = (
    "code", "function", "python", "javascript", "typescript", "rust", "java", "sql", "regex", "bug", "compile",
    "traceback", "stack trace", "exception", "refactor", "unit test", "api", "json", "bash", "script",
)  # fmt: skip

# A short input that asks for a long answer: the `fast` turn's output cap does not apply (RoutingRules).
_LENGTH_CUES = re.compile(
    r"\b(?:long|longer|detailed|in\s+detail|essay|story|lang|lange|langer|uitgebreid|uitgebreide|verhaal|opstel"
    r"|ausf(?:ü|ue)hrlich|ausf(?:ü|ue)hrliche|geschichte|aufsatz|d(?:é|e)taill(?:é|e)e?|histoire|r(?:é|e)daction)\b",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b20[2-9]\d\b")
_CODE_SHAPES = re.compile(r"```|\bdef \w+\(|\bclass \w+[:(]|=>|\bfunction \w*\(|;\s*$|\{\s*$", re.MULTILINE)
_MATH = re.compile(r"\d\s*[-+*/^%]\s*\d")

# Grounding ("<tool> first"): what a model too small to call tools gets computed for it before it answers.
_CALC_FUNCTIONS = ("sqrt", "abs", "round", "min", "max", "floor", "ceil", "exp", "log", "log2", "log10", "sin", "cos",
                   "tan", "asin", "acos", "atan")  # fmt: skip
_FUNC = r"(?<![A-Za-z_])(?:" + "|".join(sorted(_CALC_FUNCTIONS, key=len, reverse=True)) + r")(?=\s*\()"
# A run of numbers, operators, parentheses, spaces, known function names (only before "(") and ``pi``; commas only
# between digits and spaces are left out so "1,000" and "2, 3" do not glue sentences together.
_ARITH_SPAN = re.compile(r"(?:\d+(?:\.\d+)?|\.\d+|\*\*|[-+*/^%()]|" + _FUNC + r"|(?<![A-Za-z_])pi(?![A-Za-z_])|[ \t])+")
_OPERATION = re.compile(r"(?:\d|\)|pi)\s*(?:\*\*|[-+*/^%])\s*(?:[\d.(]|pi|[a-z])|" + _FUNC)
_DATE_LIKE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}/\d{1,2}/\d{2,4}$|^\d{1,2}-\d{1,2}-\d{4}$")
_TIME_QUESTION = re.compile(
    r"\bwhat(?:'s|\s+is)?\s+(?:the\s+)?(?:time|day|date)\b|\btime\s+is\s+it\b|\btoday'?s\s+date\b"
    r"|\bcurrent\s+(?:local\s+)?(?:time|date|day)\b|\bwhich\s+day\b|\bwhat\s+year\s+is\s+it\b"
    # Dutch: hoe laat is het, welke dag/datum is het, wat is de datum, welk jaar
    r"|\bhoe\s+laat\b|\bwelke\s+(?:dag|datum)\b|\bwat\s+is\s+(?:de\s+)?(?:datum|tijd)\b|\bwelk\s+jaar\b"
    r"|\bde\s+datum\s+van\s+vandaag\b"
    # German: wie spät ist es, wie viel Uhr, welcher Tag / welches Datum, der Wievielte, welches Jahr
    r"|\bwie\s+sp(?:ä|ae)t\b|\bwie\s*viel\s+uhr\b|\bwelche[rs]?\s+(?:tag|datum|wochentag|jahr)\b"
    r"|\bder\s+wievielte\b|\bdatum\s+(?:ist\s+)?heute\b|\bheutige[ns]?\s+datum\b"
    # French: quelle heure est-il, quel jour sommes-nous, quelle est la date, quelle date, quelle année
    r"|\bquelle\s+heure\b|\bquel\s+jour\b|\bquelle\s+(?:est\s+la\s+)?date\b|\bquelle\s+ann[ée]e\b"
    r"|\bla\s+date\s+d'aujourd'hui\b",
    re.IGNORECASE,
)


def estimate_tokens(text: str) -> int:
    """Rough token count: the larger of words and characters / 4 (good enough to compare against thresholds)."""
    return max(len(text) // 4, len(text.split()))


def _keyword_pattern(words: Sequence[str]) -> re.Pattern[str]:
    alternatives = sorted((re.escape(w.lower()) for w in words if w), key=len, reverse=True)
    return re.compile(r"(?<!\w)(" + "|".join(alternatives or ["(?!)"]) + r")(?!\w)")


@dataclass(frozen=True)
class RoutingRules:
    """Thresholds and keyword lists for :func:`classify`. Build from a mapping with :meth:`from_mapping`."""

    long_input_tokens: int = 500
    # The output cap of a `fast` turn (short input, no reasoning or retrieval cue) when neither the request nor the
    # route sets one and the upstream caps by default (the embedded model: 1,024 tokens, minutes on a loaded CPU for
    # "remember 4711" when a small model rambles on about the number).
    fast_max_output_tokens: int = 512
    reasoning_keywords: tuple[str, ...] = _REASONING
    retrieval_keywords: tuple[str, ...] = _RETRIEVAL
    code_keywords: tuple[str, ...] = _CODE
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False, repr=False)

    def pattern(self, kind: str) -> re.Pattern[str]:
        found = self._patterns.get(kind)
        if found is None:
            found = _keyword_pattern(getattr(self, f"{kind}_keywords"))
            self._patterns[kind] = found
        return found

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> RoutingRules:
        """Raises ValueError naming an unknown key or a value of the wrong type."""
        data = dict(data or {})
        kwargs: dict[str, Any] = {}
        for key in ("long_input_tokens", "fast_max_output_tokens"):
            if key in data:
                value = data.pop(key)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise ValueError(f"router.rules.{key} must be a positive integer")
                kwargs[key] = value
        for key in ("reasoning_keywords", "retrieval_keywords", "code_keywords"):
            if key in data:
                value = data.pop(key)
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"router.rules.{key} must be a list of strings")
                kwargs[key] = tuple(v.lower() for v in value)
        if data:
            raise ValueError(f"unknown router.rules key(s): {', '.join(sorted(data))}")
        return cls(**kwargs)


def arithmetic_expression(text: str) -> str | None:
    """The longest run of ``text`` the calculator can evaluate and that does some arithmetic (an operator between
    operands, or a known function such as ``sqrt(2)``), e.g. ``"17 * 23"`` from ``"What is 17 * 23?"``; else None.
    Dates such as ``2026-11-29`` are not arithmetic. Never raises."""
    if len(text) > 4000:
        return None
    text = spoken_to_expression(text)  # "15% of 80", "12 keer 12", "square root of 144"
    if _OPERATION.search(text) is None:  # a span below can only match where the whole text does
        return None
    spans = sorted((m.group(0).strip() for m in _ARITH_SPAN.finditer(text)), key=len, reverse=True)
    for span in spans:
        span = span.rstrip(".").strip()
        if not _OPERATION.search(span) or _DATE_LIKE.match(span):
            continue
        try:
            evaluate(span)
        except (CalculatorError, ArithmeticError, ValueError, TypeError, RecursionError):
            continue
        return span
    return None


def ground_first(text: str, category: str) -> tuple[str, dict[str, str]] | None:
    """Which server tool to run before generating, and its arguments; None when nothing should run first.

    Arithmetic -> ``calculator``; a time/date question -> ``current_datetime`` (zone from a city in the text);
    otherwise, on the ``retrieval`` route, an explicit URL -> ``web_fetch`` and anything else -> ``web_search``.
    A pinned model gets nothing (the caller chose the model and its tools). Pure; never raises.
    """
    if category == "pinned":
        return None
    if category != "code":
        expression = arithmetic_expression(text)
        if expression is not None:
            return "calculator", {"expression": expression}
    if _TIME_QUESTION.search(text):
        return "current_datetime", {"timezone": time_zone_in(text)}
    if category == "retrieval":
        url = find_url(text)
        if url is not None:
            address = url.rstrip(".,;:!?)]}'\"")
            return "web_fetch", {"url": address if "://" in address else f"https://{address}"}
        return "web_search", {"query": search_query(text)}
    return None


def asks_for_length(text: str) -> bool:
    """True when ``text`` asks for a long answer ("a long story", "in detail", "een uitgebreid verhaal")."""
    return _LENGTH_CUES.search(text) is not None


def classify(text: str, rules: RoutingRules | None = None, *, code_enabled: bool = True) -> tuple[str, str]:
    """Pick a category for ``text``: ``(category, reasoning)``. Pure and deterministic.

    Order: a URL -> retrieval; long input -> reasoning; fresh-facts words or a recent year -> retrieval; code shapes or
    words -> code (when enabled, else reasoning); reasoning words or arithmetic -> reasoning; otherwise fast. The
    reasoning names the tool :func:`ground_first` runs first, if any and not the route's usual ``web_search`` (e.g.
    ``"Contains arithmetic; calculator first"``).
    """
    category, reasoning = _classify(text, rules, code_enabled=code_enabled)
    grounding = ground_first(text, category)
    if grounding is not None and grounding[0] != "web_search":  # the retrieval route itself says "search first"
        reasoning += f"; {grounding[0]} first"
    return category, reasoning


def _classify(text: str, rules: RoutingRules | None, *, code_enabled: bool) -> tuple[str, str]:
    rules = rules or RoutingRules()
    lowered = text.lower()
    tokens = estimate_tokens(text)
    if find_url(text) is not None:
        return "retrieval", "Input contains a URL"
    if tokens > rules.long_input_tokens:
        return "reasoning", f"Input length > {rules.long_input_tokens} tokens"
    match = rules.pattern("retrieval").search(lowered)
    if match:
        return "retrieval", f"Asks for fresh facts ('{match.group(1)}')"
    year = _YEAR.search(text)
    if year:
        return "retrieval", f"Mentions a recent year ({year.group(0)})"
    code = _CODE_SHAPES.search(text) or rules.pattern("code").search(lowered)
    if code:
        what = "code" if code.re is _CODE_SHAPES else f"'{code.group(1)}'"
        if code_enabled:
            return "code", f"Input looks like a programming question ({what})"
        return "reasoning", f"Programming question ({what}) and no code model configured"
    match = rules.pattern("reasoning").search(lowered)
    if match:
        return "reasoning", f"Asks for reasoning ('{match.group(1)}')"
    if _MATH.search(text) or _MATH.search(spoken_to_expression(text)):
        return "reasoning", "Contains arithmetic"
    if text.count("?") > 1:
        return "reasoning", "Several questions in one input"
    return "fast", f"Short input ({tokens} tokens) without reasoning or retrieval cues"
