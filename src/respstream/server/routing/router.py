"""Routing for ``model: "auto"``: a category from the input, a model for the category, a healthy upstream for it.

How this works: :func:`~respstream.server.routing.classify.classify` is a pure function (text + :class:`RoutingRules` ->
category and a human reason such as ``"Input length > 500 tokens"``). :class:`Router` maps the category to model ids
from config, then picks the first model whose upstream is healthy according to a per-upstream
:class:`CircuitBreaker` (``failure_threshold`` consecutive failures open it for ``open_seconds``; then one half-open
probe is let through; a success closes it).
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from respstream.server.routing.affinity import prefer
from respstream.server.routing.classify import (
    CATEGORIES,
    RoutingRules,
    arithmetic_expression,
    classify,
    estimate_tokens,
    ground_first,
    time_zone_in,
)
from respstream.server.upstream.base import Upstream, UpstreamError

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

    async def route(self, input_text: str, pinned_model: str | None, affinity: str | None = None) -> RouteDecision:
        """Decide. ``pinned_model`` other than ``None``/``"auto"`` must be served: else :class:`ModelNotFound`.
        ``affinity``: a session key; its turns prefer the same upstream of the model (server/routing/affinity.py)."""
        available = self.models()
        if pinned_model and pinned_model != "auto":
            if pinned_model not in available:
                raise ModelNotFound(pinned_model, available)
            candidates = prefer(self._candidates([pinned_model]), affinity)
            chosen = self._pick(candidates) or (pinned_model, candidates[0][1], " (all its upstreams unhealthy)")
            self.breaker(chosen[1]).begin()
            return RouteDecision(pinned_model, "pinned", "pinned", f"Model pinned by the request{chosen[2]}", chosen[1])
        if not available:
            raise ModelNotFound("auto", available)
        category, reasoning = classify(input_text, self.rules, code_enabled=bool(self.categories.get("code")))
        candidates = self._candidates(self.categories.get(category) or [])
        candidates += [c for c in self._candidates(available) if c not in candidates]
        candidates = prefer(candidates, affinity)
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
