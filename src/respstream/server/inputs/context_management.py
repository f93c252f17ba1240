"""``context_management`` and the ``compaction_trigger`` input item: when a response compacts its context.

``context_management: [{"type": "compaction", "compact_threshold": N}]`` compacts before generating once the
context passes N tokens (N >= 1000, as OpenAI requires); a ``{"type": "compaction_trigger"}`` input item, which
must be the last one and carries nothing else, compacts on that turn instead of generating. What compacting does:
:mod:`~respstream.server.responses.compaction_step`. Facts: spec/openai-surface-2026.md rows 8 and 9.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = ["MIN_COMPACT_THRESHOLD", "CompactionPolicy", "parse_context_management", "split_trigger"]

MIN_COMPACT_THRESHOLD = 1000
# Without compact_threshold: compact once the context passes this share of the model's known context window.
DEFAULT_WINDOW_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """Compact when the context passes ``threshold`` tokens (``None``: 80% of the model's context window)."""

    threshold: int | None = None

    def echo(self) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {"type": "compaction"}
        if self.threshold is not None:
            entry["compact_threshold"] = self.threshold
        return [entry]


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def parse_context_management(raw: Any) -> CompactionPolicy | None:
    """Validate ``context_management``. Raises a 400 :class:`HTTPError` naming the entry or key."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise _bad("context_management must be a list of entries", "context_management", "invalid_type")
    policy: CompactionPolicy | None = None
    for i, entry in enumerate(raw):
        where = f"context_management[{i}]"
        if not isinstance(entry, dict):
            raise _bad(f"{where} must be an object", where, "invalid_type")
        if entry.get("type") != "compaction":
            raise _bad(f"{where}.type {entry.get('type')!r} is not supported (supported: compaction)",
                       f"{where}.type", "unsupported_parameter")
        for key in entry:
            if key not in ("type", "compact_threshold"):
                raise _bad(f"{where}.{str(key)[:64]} is not supported (known: type, compact_threshold)",
                           f"{where}.{str(key)[:64]}", "unsupported_parameter")
        if policy is not None:
            raise _bad("context_management may hold one compaction entry", where)
        threshold = entry.get("compact_threshold")
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, int):
                raise _bad(f"{where}.compact_threshold must be an integer", f"{where}.compact_threshold",
                           "invalid_type")
            if threshold < MIN_COMPACT_THRESHOLD:
                raise _bad(f"{where}.compact_threshold must be at least {MIN_COMPACT_THRESHOLD} (got {threshold})",
                           f"{where}.compact_threshold")
        policy = CompactionPolicy(threshold)
    return policy


def split_trigger(raw_input: Any) -> tuple[Any, bool]:
    """``input`` without its ``compaction_trigger`` item, and whether it had one. Raises a 400 naming the item when
    the trigger is not the last item or carries any key but ``type``."""
    if not isinstance(raw_input, list):
        return raw_input, False
    for i, item in enumerate(raw_input):
        if not isinstance(item, dict) or item.get("type") != "compaction_trigger":
            continue
        if i != len(raw_input) - 1:
            raise _bad("The 'compaction_trigger' item must be the final input item.", f"input[{i}]")
        for key in item:
            if key != "type":
                raise _bad(f"input[{i}].{str(key)[:64]} is not allowed on a compaction_trigger item (it carries "
                           "only its type)", f"input[{i}].{str(key)[:64]}", "unsupported_parameter")
        return raw_input[:-1], True
    return raw_input, False
