"""The ``[limits]`` table: caps on the work one request may cause (docs/security.md "Work caps per request").

How this works: :class:`WorkLimits` holds every cap with its default; :meth:`WorkLimits.from_mapping` reads the
config table (an unknown key or a value out of range is a ``ValueError`` naming it). The app installs the table once
at startup with :func:`install`; the request parsers and the fetchers read it with :func:`current`, so the caps
reach code that is called without the config (``parse_request`` is also used by the WebSocket and
``/input_tokens`` paths).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["WorkLimits", "current", "install"]


@dataclass(frozen=True, slots=True)
class WorkLimits:
    # text.format json_schema, checked when the request arrives (400 naming the cap past it).
    schema_max_bytes: int = 256 << 10  # the schema as compact JSON
    schema_max_nodes: int = 20_000  # objects, arrays and scalars in the schema
    schema_max_depth: int = 64  # nesting of objects/arrays inside the schema
    schema_max_enum_values: int = 1_000  # enum + const values across the whole schema (OpenAI's cap)
    schema_max_patterns: int = 200  # pattern / patternProperties regexes across the schema
    # The schema check and the answer's validation run in a separate process killed past this deadline.
    validation_seconds: float = 5.0
    validation_workers: int = 2  # such processes at once (later checks wait, fairly across clients, off the deadline)
    validation_memory_bytes: int = 1 << 30  # address-space limit of a validation process
    # input_file with file_url: parts per request, bytes of all of them (each also <= [tools] fetch_max_bytes),
    # one deadline for all fetches.
    file_urls_per_request: int = 16
    file_urls_max_total_bytes: int = 16 << 20
    file_urls_fetch_seconds: float = 60.0
    # Bytes the fetched files of all requests hold at once (reserved before fetching, held until the response ends;
    # inputs/fetch_budget.py): for the whole gateway (past it 503) and for one API key's requests (past it 429).
    file_urls_inflight_bytes: int = 256 << 20
    file_urls_inflight_bytes_per_key: int = 128 << 20
    # Memory requests in flight hold (the decoded JSON, the parsed request, the upstream's messages; reserved before
    # decoding, held until the response ends; inputs/request_memory.py): gateway-wide (past it 503), per API key (429).
    requests_inflight_bytes: int = 256 << 20
    requests_inflight_bytes_per_key: int = 128 << 20
    # previous_response_id: records read and bytes of items collected when the history is rebuilt from its chain.
    history_max_depth: int = 256
    history_max_bytes: int = 8 << 20
    # Bytes one API key may put in the store within retention_seconds (key_quota.py): past it 429.
    store_max_bytes_per_key: int = 1 << 30
    # MCP servers: bytes of one HTTP response read, content parts (or tools) of one result.
    mcp_max_response_bytes: int = 4 << 20
    mcp_max_result_parts: int = 1_000
    # The summary compaction writes (context_management, compaction_trigger, /v1/responses/compact): its streamed
    # deltas; past it the summary is stopped and the compaction fails naming this key (compaction_step.py).
    compaction_max_output_tokens: int = 4_096

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> WorkLimits:
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in known:
                raise ValueError(f"limits.{key} is not a known limit (known: {', '.join(sorted(known))})")
            default = getattr(cls(), key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"limits.{key} must be a number")
            if isinstance(default, int) and not isinstance(value, int):
                raise ValueError(f"limits.{key} must be an integer")
            if value <= 0:
                raise ValueError(f"limits.{key} must be positive, not {value}")
            values[key] = value
        return replace(cls(), **values)


_current = WorkLimits()


def install(limits: WorkLimits) -> None:
    """Make ``limits`` the caps every request is held to (the app calls this at startup)."""
    global _current
    _current = limits


def current() -> WorkLimits:
    return _current
