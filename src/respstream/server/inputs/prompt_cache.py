"""Prompt caching fields: ``prompt_cache_options``, per-block ``prompt_cache_breakpoint`` and the deprecated
``prompt_cache_retention``, validated into one :class:`PromptCache` kept on the request's options.

The gateway does not cache by itself here: the embedded model's prefix cache and the provider adapters read
:class:`PromptCache` (``ttl_seconds``, ``mode``, ``breakpoints``). ``prompt_cache_retention`` (``in_memory`` /
``24h``, still sent by older clients) is mapped onto the same lifetime; OpenAI refuses a request that sets both it and
``prompt_cache_options.ttl``, and so does the gateway. Facts: spec/openai-surface-2026.md row 11.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = ["CACHE_TTLS", "MAX_BREAKPOINTS", "Breakpoint", "PromptCache", "find_breakpoints", "parse_prompt_cache"]

# The lifetimes OpenAI names: 30m is the request default (and its only request-level value today); 12h is the
# longer breakpoint lifetime. Retention maps: in_memory -> the default, 24h -> 24 hours.
CACHE_TTLS = {"30m": 30 * 60, "12h": 12 * 3600}
_RETENTION = {"in_memory": 30 * 60, "24h": 24 * 3600}
_MODES = ("implicit", "explicit")
MAX_BREAKPOINTS = 4  # written per request (OpenAI: "each request can write up to four breakpoints")


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """An explicit cache breakpoint: the prefix ends after ``input[item].content[part]`` of the request's ``input``
    list as sent (after Codex's ``additional_tools`` items are lifted out of it)."""

    item: int
    part: int
    ttl_seconds: int


@dataclass(frozen=True, slots=True)
class PromptCache:
    """The caching the request asked for. ``None`` fields were not given."""

    ttl: str | None = None  # prompt_cache_options.ttl as given
    mode: str = "implicit"
    retention: str | None = None  # prompt_cache_retention as given (deprecated)
    options_given: bool = False
    breakpoints: tuple[Breakpoint, ...] = field(default_factory=tuple)

    @property
    def ttl_seconds(self) -> int:
        """How long a prefix this request writes should be kept (the default: 30 minutes)."""
        if self.ttl is not None:
            return CACHE_TTLS[self.ttl]
        if self.retention is not None:
            return _RETENTION[self.retention]
        return CACHE_TTLS["30m"]

    def echo(self) -> dict[str, Any]:
        """The Response's echo: the options in effect when either field was given, else nothing."""
        if not self.options_given and self.retention is None:
            return {}
        echo: dict[str, Any] = {}
        if self.options_given:
            echo["prompt_cache_options"] = {"ttl": self.ttl or "30m", "mode": self.mode}
        if self.retention is not None:
            echo["prompt_cache_retention"] = self.retention
        return echo


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def _ttl(value: Any, param: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in CACHE_TTLS:
        raise _bad(f"{param} must be one of {', '.join(CACHE_TTLS)}", param)
    return str(value)


def find_breakpoints(raw_input: Any, default_ttl: int) -> tuple[Breakpoint, ...]:
    """Every ``prompt_cache_breakpoint`` on a content part of ``input`` (at most :data:`MAX_BREAKPOINTS`)."""
    if not isinstance(raw_input, list):
        return ()
    found: list[Breakpoint] = []
    for i, item in enumerate(raw_input):
        content = item.get("content") if isinstance(item, dict) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("prompt_cache_breakpoint") is None:
                continue
            param = f"input[{i}].content[{j}].prompt_cache_breakpoint"
            spec = part["prompt_cache_breakpoint"]
            if not isinstance(spec, dict):
                raise _bad(f"{param} must be an object", param, "invalid_type")
            for key in spec:
                if key not in ("mode", "ttl"):
                    raise _bad(f"{param}.{str(key)[:64]} is not supported (known: mode, ttl)",
                               f"{param}.{str(key)[:64]}", "unsupported_parameter")
            if spec.get("mode", "explicit") != "explicit":
                raise _bad(f"{param}.mode must be 'explicit'", f"{param}.mode")
            ttl = _ttl(spec.get("ttl"), f"{param}.ttl")
            if len(found) == MAX_BREAKPOINTS:
                raise _bad(f"at most {MAX_BREAKPOINTS} prompt_cache_breakpoint may be written per request; "
                           f"{param} is one more", param)
            found.append(Breakpoint(i, j, CACHE_TTLS[ttl] if ttl else default_ttl))
    return tuple(found)


def parse_prompt_cache(body: dict[str, Any]) -> PromptCache:
    """Validate ``prompt_cache_options``, ``prompt_cache_retention`` and the input's breakpoints. Raises a 400
    :class:`HTTPError` naming the field."""
    raw = body.get("prompt_cache_options")
    retention = body.get("prompt_cache_retention")
    if retention is not None and (not isinstance(retention, str) or retention not in _RETENTION):
        raise _bad(f"prompt_cache_retention must be one of {', '.join(_RETENTION)}", "prompt_cache_retention")
    if raw is not None and not isinstance(raw, dict):
        raise _bad("prompt_cache_options must be an object", "prompt_cache_options", "invalid_type")
    options = raw or {}
    for key in options:
        if key not in ("ttl", "mode"):
            raise _bad(f"prompt_cache_options.{str(key)[:64]} is not supported (known: ttl, mode)",
                       f"prompt_cache_options.{str(key)[:64]}", "unsupported_parameter")
    ttl = _ttl(options.get("ttl"), "prompt_cache_options.ttl")
    if ttl is not None and retention is not None:
        raise _bad("prompt_cache_retention is deprecated and cannot be combined with prompt_cache_options.ttl "
                   "(send only prompt_cache_options.ttl)", "prompt_cache_retention")
    mode = options.get("mode")
    if mode is not None and mode not in _MODES:
        raise _bad(f"prompt_cache_options.mode must be one of {', '.join(_MODES)}", "prompt_cache_options.mode")
    cache = PromptCache(ttl=ttl, mode=mode or "implicit", retention=retention, options_given=raw is not None)
    breakpoints = find_breakpoints(body.get("input"), cache.ttl_seconds)
    return PromptCache(ttl=cache.ttl, mode=cache.mode, retention=retention, options_given=cache.options_given,
                       breakpoints=breakpoints)
