"""Session affinity: the turns of one session prefer the same upstream when several serve the model.

Why: an agent (Codex CLI sends ``session-id``/``thread-id`` headers and a ``prompt_cache_key``) resends a long,
growing prefix every turn; the upstream that served the last turn has that prefix in its KV/prompt cache. How:
:func:`affinity_key` takes the request's key (``prompt_cache_key`` first, as OpenAI uses it for cache routing, then
the session headers); :func:`prefer` rotates the upstreams that serve the chosen model by a stable hash of the key, so
one session always tries the same one first while different sessions spread over all of them. Health still wins:
the router skips an upstream whose breaker is open, and falls back as before.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TypeVar

__all__ = ["AFFINITY_HEADERS", "affinity_key", "prefer"]

# Header spellings real clients use (Codex: `session-id`/`thread-id`; older builds `session_id`).
AFFINITY_HEADERS = ("session-id", "session_id", "thread-id", "thread_id", "x-session-id")

T = TypeVar("T")


def affinity_key(headers: Mapping[str, str], prompt_cache_key: str | None) -> str | None:
    """The session key of a request, or ``None`` when it has none."""
    if prompt_cache_key:
        return prompt_cache_key
    for name in AFFINITY_HEADERS:
        value = headers.get(name)
        if value:
            return value[:256]
    return None


def prefer(candidates: list[tuple[str, T]], key: str | None) -> list[tuple[str, T]]:
    """``candidates`` with the upstreams of the first model rotated by ``key`` (unchanged without a key)."""
    if not key or len(candidates) < 2:
        return candidates
    model = candidates[0][0]
    group = [c for c in candidates if c[0] == model]
    if len(group) < 2:
        return candidates
    start = zlib.crc32(key.encode("utf-8", "replace")) % len(group)
    rotated = group[start:] + group[:start]
    return rotated + [c for c in candidates if c[0] != model]
