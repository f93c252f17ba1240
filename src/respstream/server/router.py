"""Routing for ``model: "auto"``: a category from the input, a model for the category, a healthy upstream for it.

How this works: :func:`classify` is a pure function (text + :class:`RoutingRules` -> category and a human reason such
as ``"Input length > 500 tokens"``). :class:`Router` maps the category to model ids from config, then picks the first
model whose upstream is healthy according to a per-upstream :class:`CircuitBreaker` (``failure_threshold``
consecutive failures open it for ``open_seconds``; then one half-open probe is let through; a success closes it).
Upstreams that failed recently but are not yet open are used only when nothing cleaner is available.

Config (the ``[router]`` table, or keyword arguments)::

    categories = { fast = ["m1"], reasoning = ["m2", "m1"], retrieval = ["m1"], code = ["m3"] }
    failure_threshold = 3      # consecutive failures that open an upstream's circuit
    open_seconds = 30          # how long it stays open before a half-open probe
    [router.rules]
    long_input_tokens = 500    # estimated tokens above which an input is "reasoning"
    reasoning_keywords = [...] # override the built-in lists (lower case, whole words/phrases)
    retrieval_keywords = [...]
    code_keywords = [...]

A category without configured models (or whose models are not served) uses every model, in upstream order, so the
default is "every category maps to the first available model". ``code`` is only chosen when configured.
"""

from __future__ import annotations

import re
import time
import zoneinfo
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from respstream.server.tools.arith_words import spoken_to_expression
from respstream.server.tools.calculator import CalculatorError, evaluate
from respstream.server.tools.search_query import search_query
from respstream.server.upstream.base import Upstream, UpstreamError
from respstream.server.url_scan import find_url

__all__ = [
    "CATEGORIES",
    "CircuitBreaker",
    "ModelNotFound",
    "RouteDecision",
    "Router",
    "RoutingRules",
    "arithmetic_expression",
    "classify",
    "estimate_tokens",
    "ground_first",
    "time_zone_in",
]

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
_ZONE_REGIONS = ("Africa/", "America/", "Antarctica/", "Asia/", "Atlantic/", "Australia/", "Europe/", "Indian/",
                 "Pacific/")  # fmt: skip


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
        if "long_input_tokens" in data:
            value = data.pop("long_input_tokens")
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError("router.rules.long_input_tokens must be a positive integer")
            kwargs["long_input_tokens"] = value
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


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    """Lower-case city name with spaces ("new york") -> IANA zone; the shortest zone name wins (canonical over
    legacy links such as America/Argentina/Buenos_Aires vs America/Buenos_Aires, deterministically)."""
    found: dict[str, str] = {}
    for zone in sorted(zoneinfo.available_timezones(), key=lambda z: (len(z), z)):
        if zone.startswith(_ZONE_REGIONS):
            found.setdefault(zone.rsplit("/", 1)[1].replace("_", " ").lower(), zone)
    return found


def time_zone_in(text: str) -> str:
    """The IANA zone of a city named in ``text`` (``"Amsterdam"`` -> ``Europe/Amsterdam``; up to three words, e.g.
    "New York"), else ``"UTC"``."""
    words = re.findall(r"[^\W\d]+", text.lower())
    names = _zone_names()
    for size in (3, 2, 1):  # longest names first: "new york" before "york"
        for i in range(len(words) - size + 1):
            zone = names.get(" ".join(words[i:i + size]))
            if zone is not None:
                return zone
    return "UTC"


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


class ModelNotFound(LookupError):
    """A pinned model nobody serves. ``available`` lists the model ids that exist (for the 400 error body)."""

    def __init__(self, model: str, available: list[str]) -> None:
        super().__init__(f"model {model!r} not found; available: {', '.join(available) or '(none)'}")
        self.model = model
        self.available = available


@dataclass(frozen=True)
class RouteDecision:
    """Where one response goes. ``source``: ``router`` | ``fallback`` | ``pinned``; ``attempted``: upstream names
    already tried for this response (fallback skips them)."""

    model_id: str
    category: str
    source: str
    reasoning: str
    upstream: Upstream
    attempted: tuple[str, ...] = ()


class CircuitBreaker:
    """Per-upstream health: closed -> (N consecutive failures) -> open for T s -> half-open (one probe) -> closed."""

    def __init__(
        self, failure_threshold: int = 3, open_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic
    ):
        self.failure_threshold = max(1, failure_threshold)
        self.open_seconds = open_seconds
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        self.probe_at: float | None = None  # a half-open probe in flight since (expires: a lost probe must not pin)
        self.last_error: str | None = None

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        if self.clock() - self.opened_at >= self.open_seconds:
            return "half_open"
        return "open"

    def available(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        probe_running = self.probe_at is not None and self.clock() - self.probe_at < self.open_seconds
        return state == "half_open" and not probe_running

    def begin(self) -> None:
        """A request is being sent: in half-open, it is the one probe."""
        if self.state == "half_open":
            self.probe_at = self.clock()

    def success(self) -> None:
        self.failures, self.opened_at, self.probe_at, self.last_error = 0, None, None, None

    def failure(self, error: str) -> None:
        self.failures += 1
        self.last_error = error
        if self.state == "half_open" or self.failures >= self.failure_threshold:
            self.opened_at = self.clock()
        self.probe_at = None


def _is_categories(value: Mapping[str, Any]) -> bool:
    return all(isinstance(v, list | tuple) and all(isinstance(m, str) for m in v) for v in value.values())


class Router:
    """Routes requests across ``upstreams``. See the module docstring for config keys.

    ``categories`` may also be the whole ``[router]`` config mapping (``categories``, ``rules``,
    ``failure_threshold``, ``open_seconds``). Raises ValueError on bad config.
    """

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        categories: Mapping[str, Any] | None = None,
        rules: RoutingRules | Mapping[str, Any] | None = None,
        *,
        failure_threshold: int = 3,
        open_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        config: dict[str, Any] = {}
        if categories is not None and not _is_categories(categories):
            config = dict(categories)
            categories = config.pop("categories", None)
            rules = config.pop("rules", rules)
            failure_threshold = int(config.pop("failure_threshold", failure_threshold))
            open_seconds = float(config.pop("open_seconds", open_seconds))
            if config:
                raise ValueError(f"unknown router config key(s): {', '.join(sorted(config))}")
        self.upstreams = list(upstreams)
        self.categories: dict[str, list[str]] = {k: list(v) for k, v in (categories or {}).items()}
        for name in self.categories:
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
                raise ValueError(f"router category name {name!r} must be lower-case letters, digits, - or _")
        self.rules = rules if isinstance(rules, RoutingRules) else RoutingRules.from_mapping(rules)
        self._breakers = {u.name: CircuitBreaker(failure_threshold, open_seconds, clock) for u in self.upstreams}

    # -- lookups ---------------------------------------------------------------------------------------------------

    def models(self) -> list[str]:
        """Every model id served, in upstream order, without duplicates."""
        seen: dict[str, None] = {}
        for upstream in self.upstreams:
            for model in upstream.models:
                seen.setdefault(model, None)
        return list(seen)

    def breaker(self, upstream: Upstream | str) -> CircuitBreaker:
        name = upstream if isinstance(upstream, str) else upstream.name
        if name not in self._breakers:
            self._breakers[name] = CircuitBreaker()
        return self._breakers[name]

    def health(self) -> dict[str, dict[str, Any]]:
        """Per-upstream state for /healthz and metrics."""
        return {
            u.name: {"state": b.state, "consecutive_failures": b.failures, "last_error": b.last_error}
            for u in self.upstreams
            for b in [self.breaker(u)]
        }

    def _candidates(self, models: Sequence[str], exclude: Sequence[str] = ()) -> list[tuple[str, Upstream]]:
        return [(m, u) for m in models for u in self.upstreams if m in u.models and u.name not in exclude]

    def _pick(self, candidates: list[tuple[str, Upstream]]) -> tuple[str, Upstream, str] | None:
        """First clean candidate, else first available one (probe), else None."""
        for model, upstream in candidates:
            b = self.breaker(upstream)
            if b.state == "closed" and b.failures == 0:
                return model, upstream, ""
        for model, upstream in candidates:
            if self.breaker(upstream).available():
                return model, upstream, " (recent failures elsewhere)"
        return None

    # -- decisions -------------------------------------------------------------------------------------------------

    async def route(self, input_text: str, pinned_model: str | None) -> RouteDecision:
        """Decide. ``pinned_model`` other than ``None``/``"auto"`` must be served: else :class:`ModelNotFound`."""
        available = self.models()
        if pinned_model and pinned_model != "auto":
            if pinned_model not in available:
                raise ModelNotFound(pinned_model, available)
            candidates = self._candidates([pinned_model])
            chosen = self._pick(candidates) or (pinned_model, candidates[0][1], " (all its upstreams unhealthy)")
            self.breaker(chosen[1]).begin()
            return RouteDecision(pinned_model, "pinned", "pinned", f"Model pinned by the request{chosen[2]}", chosen[1])
        if not available:
            raise ModelNotFound("auto", available)
        category, reasoning = classify(input_text, self.rules, code_enabled=bool(self.categories.get("code")))
        candidates = self._candidates(self.categories.get(category) or [])
        candidates += [c for c in self._candidates(available) if c not in candidates]
        picked = self._pick(candidates)
        if picked is None:
            model, upstream = candidates[0]
            picked = (model, upstream, "; every upstream is unhealthy, trying anyway")
        self.breaker(picked[1]).begin()
        return RouteDecision(picked[0], category, "router", reasoning + picked[2], picked[1])

    def fallback(self, decision: RouteDecision, error: BaseException) -> RouteDecision | None:
        """The next healthy upstream for the same category (same model first), or ``None``.

        ``None`` when the failure happened after the first token (the client already saw output), or nothing is left.
        """
        if isinstance(error, UpstreamError) and not error.before_first_token:
            return None
        attempted = (*decision.attempted, decision.upstream.name)
        if decision.source == "pinned" or decision.category == "pinned":
            models = [decision.model_id]
        else:
            models = [decision.model_id, *self.categories.get(decision.category, []), *self.models()]
        candidates = self._candidates(list(dict.fromkeys(models)), exclude=attempted)
        picked = self._pick(candidates)
        if picked is None:
            return None
        code = getattr(error, "code", type(error).__name__)
        self.breaker(picked[1]).begin()
        return RouteDecision(
            picked[0],
            decision.category,
            "fallback",
            f"{decision.upstream.name} failed ({code}); using {picked[1].name}",
            picked[1],
            attempted,
        )

    def record_success(self, upstream: Upstream) -> None:
        self.breaker(upstream).success()

    def record_failure(self, upstream: Upstream, error: BaseException) -> None:
        """Count a failure. A 4xx from the upstream (bad request) says nothing about its health and is ignored."""
        status = getattr(error, "status", None)
        if isinstance(status, int) and 400 <= status < 500 and status != 429:
            self.breaker(upstream).probe_at = None
            return
        self.breaker(upstream).failure(str(getattr(error, "code", type(error).__name__)))
