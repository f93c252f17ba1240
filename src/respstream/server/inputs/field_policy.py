"""Which top-level fields of ``POST /v1/responses`` the gateway knows, and what happens to the rest.

Every field in :data:`KNOWN_FIELDS` is honoured, mapped or refused (400 naming it) by the parsers of this package;
docs/compatibility.md has one row per field and ``tests/docs/test_compatibility_claims.py`` holds each row to the
code. A field outside that set is one this gateway has never heard of (a newer client, a vendor extension): it is
accepted and *reported* (the ``x-respstream-ignored-fields`` response header, a log line, the
``respstream_ignored_request_fields`` counter), so new client versions keep working and nothing is dropped
unseen; with ``strict_fields = true`` it is refused instead (400 ``unknown_parameter`` naming it).
"""

from __future__ import annotations

from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = [
    "DEFERRED_WORK_FIELDS",
    "IGNORED_FIELDS_HEADER",
    "KNOWN_FIELDS",
    "MAX_REPORTED",
    "REFUSED_FIELDS",
    "check_refused_fields",
    "ignored_fields",
    "parse_access_programs",
]

IGNORED_FIELDS_HEADER = "x-respstream-ignored-fields"
MAX_REPORTED = 16  # names listed in the header and the log line (a body may carry thousands)
_MAX_NAME = 64  # characters of one reported name (a client-chosen key must not make a huge header)

# Read by the deferred background work code (``background_options.completion_window``), not by this package.
DEFERRED_WORK_FIELDS = frozenset({"background_options"})

KNOWN_FIELDS = frozenset({
    # Open Responses CreateResponseBody
    "model", "input", "previous_response_id", "include", "tools", "tool_choice", "metadata", "text", "temperature",
    "top_p", "presence_penalty", "frequency_penalty", "parallel_tool_calls", "stream", "stream_options",
    "background", "max_output_tokens", "max_tool_calls", "reasoning", "safety_identifier", "prompt_cache_key",
    "truncation", "instructions", "store", "service_tier", "top_logprobs",
    # OpenAI's Responses API beyond it, and the seed platform's fields
    "conversation", "conversation_id", "user", "prompt", "prompt_cache_retention", "response_format",
    "client_metadata", "project_id",
    # The late-2026 request body (spec/openai-surface-2026.md)
    "context_management", "prompt_cache_options", "moderation", "access_programs", "multi_agent", "image",
    *DEFERRED_WORK_FIELDS,
})

# Late-2026 fields the gateway cannot do: refused when given (null is "not given").
_REFUSED = {
    "moderation": "moderation is not supported: the gateway runs no moderation model, so it cannot apply a "
                  "moderation policy (leave it out)",
    "multi_agent": "multi_agent (the multi-agent beta) is not supported: the gateway runs no sub-agents",
    "image": "image (image.context_compression, a beta create field) is not supported: the gateway's models "
             "take images as they are",
}
REFUSED_FIELDS = frozenset(_REFUSED)  # what check_refused_fields reads
_CYBER_PROGRAMS = ("standard", "daybreak_blue", "daybreak_red")


def check_refused_fields(body: dict[str, Any]) -> None:
    """Raise 400 ``unsupported_parameter`` for a late-2026 field the gateway cannot honour."""
    for key, why in _REFUSED.items():
        if body.get(key) is not None:
            raise HTTPError(400, "unsupported_parameter", why, param=key)


def parse_access_programs(raw: Any) -> dict[str, str] | None:
    """``access_programs {cyber}`` (Codex sends it): ``standard`` is what every request of this gateway gets, so it
    is taken and echoed; the trusted-access programs (``daybreak_*``) are not enabled here, as OpenAI answers an
    organisation that lacks them (400 naming ``access_programs.cyber``)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise HTTPError(400, "invalid_type", "access_programs must be an object", param="access_programs")
    for key in raw:
        if key != "cyber":
            raise HTTPError(400, "unsupported_parameter",
                            f"access_programs.{str(key)[:_MAX_NAME]} is not supported (known: cyber)",
                            param=f"access_programs.{str(key)[:_MAX_NAME]}")
    cyber = raw.get("cyber")
    if cyber is None:
        return {}
    if cyber not in _CYBER_PROGRAMS:
        raise HTTPError(400, "invalid_value", f"access_programs.cyber must be one of {', '.join(_CYBER_PROGRAMS)}",
                        param="access_programs.cyber")
    if cyber != "standard":
        raise HTTPError(400, "unsupported_parameter",
                        f"access_programs.cyber {cyber!r} is not enabled on this gateway (only 'standard')",
                        param="access_programs.cyber")
    return {"cyber": "standard"}


def ignored_fields(body: dict[str, Any], *, strict: bool) -> tuple[str, ...]:
    """The top-level fields of ``body`` nobody here reads, in body order (at most :data:`MAX_REPORTED`, each cut
    to 64 characters, any character but printable ASCII shown as ``?``). With ``strict`` the first one is a 400
    ``unknown_parameter`` naming it instead."""
    found: list[str] = []
    for key in body:
        if key in KNOWN_FIELDS:
            continue
        name = str(key)[:_MAX_NAME]
        if strict:
            raise HTTPError(400, "unknown_parameter",
                            f"{name} is not a field this gateway knows (strict_fields is on; see "
                            "docs/compatibility.md for every field)", param=name)
        # Reported in a header and a log line: printable ASCII only (a key may hold CR/LF or any character).
        found.append("".join(c if " " <= c <= "~" and c != "," else "?" for c in name))
        if len(found) == MAX_REPORTED:
            break
    return tuple(found)
