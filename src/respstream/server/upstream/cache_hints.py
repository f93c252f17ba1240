"""What a request asked of prompt caching, in the form every upstream adapter reads (provider-neutral, no IO).

- :class:`CacheHints` (``GenerationRequest.cache``): whether caching was asked for at all, ``mode``
  (``implicit``/``explicit``), the lifetime the client asked for (``None``: the upstream's default) and the OpenAI
  body fields as the client sent them (``prompt_cache_options`` / ``prompt_cache_retention``), for upstreams that take
  them unchanged (Chat Completions, native Responses).
- :data:`CACHE_BREAKPOINT_KEY`: the Chat-shaped message key under which a client's ``prompt_cache_breakpoint`` reaches
  an adapter (server/inputs/history.py puts it there). The gateway joins a message's text parts into one text, so a
  breakpoint on any part of a message marks the end of that message: the cached prefix ends there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["BREAKPOINT_TTLS", "CACHE_BREAKPOINT_KEY", "CacheHints", "breakpoint_ttl_seconds", "marked_content",
           "strip_cache_marks"]

# On a message: the breakpoint object as the client gave it ({"mode": "explicit", "ttl"?: "30m" | "12h"}).
CACHE_BREAKPOINT_KEY: Final = "prompt_cache_breakpoint"
BREAKPOINT_TTLS: Final = {"30m": 30 * 60, "12h": 12 * 3600}


@dataclass(frozen=True, slots=True)
class CacheHints:
    """``asked``: the client sent ``prompt_cache_key``, ``prompt_cache_options`` or ``prompt_cache_retention``.
    ``ttl_seconds``: the lifetime asked for explicitly (``prompt_cache_options.ttl``, ``prompt_cache_retention:
    24h``); ``None`` when only the default was (``in_memory`` is the default policy). ``wire``: the OpenAI fields
    as given."""

    asked: bool = False
    mode: str = "implicit"
    ttl_seconds: int | None = None
    wire: dict[str, Any] = field(default_factory=dict)


def breakpoint_ttl_seconds(mark: Any, hints: CacheHints) -> int | None:
    """A marked message's lifetime: the breakpoint's own ``ttl``, else the request's, else ``None`` (the default)."""
    ttl = mark.get("ttl") if isinstance(mark, dict) else None
    return BREAKPOINT_TTLS.get(ttl) if isinstance(ttl, str) else hints.ttl_seconds


def strip_cache_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without :data:`CACHE_BREAKPOINT_KEY` (a copy only when one has it)."""
    if not any(CACHE_BREAKPOINT_KEY in m for m in messages):
        return messages
    return [{k: v for k, v in m.items() if k != CACHE_BREAKPOINT_KEY} for m in messages]


def marked_content(content: Any, mark: dict[str, Any], text_type: str) -> Any:
    """An OpenAI-shaped message ``content`` with ``prompt_cache_breakpoint: mark`` on its last part (a string becomes
    one ``text_type`` part); content with no part to mark is returned as it is."""
    if isinstance(content, str) and content:
        return [{"type": text_type, "text": content, "prompt_cache_breakpoint": mark}]
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        return [*content[:-1], {**content[-1], "prompt_cache_breakpoint": mark}]
    return content
