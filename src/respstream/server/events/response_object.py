"""The Response object: the one place it is built, for every dialect, event, ``GET`` and JSON answer.

How this works: :func:`new_response` makes the object ``response.created`` carries from the parsed request, the
routing decision and the dialect. It has every field the Open Responses ``ResponseResource`` requires (spec
2026-04-24, ``spec/openresponses/openapi-2026-04-24.json``), with the right JSON type and the value actually used:

- sampling values the request did not give are the upstream's own defaults (:class:`SamplingDefaults`: an upstream
  may declare ``sampling_defaults``; an OpenAI-compatible one without it is taken to use OpenAI's, ``temperature``
  1.0 and ``top_p`` 1.0; the embedded llama.cpp model declares llama.cpp's 0.8 and 0.95); penalties 0,
  ``top_logprobs`` 0, ``truncation`` ``disabled``, ``service_tier`` ``default``, ``reasoning`` ``{effort, summary}``;
- ``completed_at`` is ``null`` until :func:`mark_completed` sets it (in the dialect's clock unit, like
  ``created_at``: milliseconds on the platform, seconds otherwise);
- ``tools`` echoes the client's function tools in the spec's ``FunctionTool`` shape (``type``, ``name``,
  ``description``, ``parameters``, ``strict``, each present, ``null`` when not sent).

Request fields the parsed request may carry (issue 11's input side adds them to ``ResponseRequest``) are read with
``getattr``, so a field not parsed yet echoes its default instead of breaking the object.
The writer then fills ``status``, ``output``, ``usage``, ``error``, ``incomplete_details`` (and the platform's
``output_text`` / ``tool_calls`` summary) as the response runs.
"""

from __future__ import annotations

from typing import Any

from respstream.server.events.dialects import Dialect
from respstream.server.upstream.sampling import OPENAI_SAMPLING_DEFAULTS, SamplingDefaults, sampling_defaults_of

__all__ = ["OPENAI_SAMPLING_DEFAULTS", "SamplingDefaults", "echo_tools", "mark_completed", "new_response",
           "sampling_defaults_of"]


def echo_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client's function tools as the spec's ``FunctionTool`` (every field present, extra fields dropped)."""
    echoed = []
    for tool in tools:
        if tool.get("type") != "function":
            echoed.append(dict(tool))
            continue
        strict = tool.get("strict")
        echoed.append({
            "type": "function",
            "name": tool.get("name"),
            "description": tool.get("description") if isinstance(tool.get("description"), str) else None,
            "parameters": tool.get("parameters") if isinstance(tool.get("parameters"), dict) else None,
            "strict": strict if isinstance(strict, bool) else None,
        })
    return echoed


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text_field(req: Any) -> dict[str, Any]:
    text = getattr(req, "text", None)
    if isinstance(text, dict) and isinstance(text.get("format"), dict):
        out: dict[str, Any] = {"format": dict(text["format"])}
        if isinstance(text.get("verbosity"), str):
            out["verbosity"] = text["verbosity"]
        return out
    return {"format": {"type": "text"}}


def _reasoning_field(req: Any) -> dict[str, Any]:
    reasoning = getattr(req, "reasoning", None)
    if isinstance(reasoning, dict):
        return {"effort": _opt_str(reasoning.get("effort")), "summary": _opt_str(reasoning.get("summary"))}
    return {"effort": None, "summary": None}


def new_response(
    rid: str,
    req: Any,
    *,
    created: float,
    model: str,
    dialect: Dialect,
    defaults: SamplingDefaults = OPENAI_SAMPLING_DEFAULTS,
) -> dict[str, Any]:
    """The Response object at ``response.created`` (``output`` empty, ``completed_at`` null).

    ``req`` is the parsed :class:`~respstream.server.inputs.response_request.ResponseRequest`; ``created`` unix
    seconds."""
    conversation_id = getattr(req, "conversation_id", None)
    return {
        "id": rid,
        "object": "response",
        "created_at": dialect.created_at(created),
        "completed_at": None,
        "status": "queued" if req.background else "in_progress",
        "incomplete_details": None,
        "model": model,
        "previous_response_id": req.previous_response_id,
        "instructions": req.instructions,
        "output": [],
        "error": None,
        # The tools as sent (namespace, custom, shell...); Open Responses has no such tool types, so there the
        # flat functions the model was offered (server/events/client_tool_kinds.py).
        "tools": echo_tools(req.client_tools if dialect.extension_tool_items
                            else getattr(req, "declared_tools", None) or req.client_tools),
        "tool_choice": req.tool_choice,
        "truncation": _opt_str(getattr(req, "truncation", None)) or "disabled",
        "parallel_tool_calls": bool(req.parallel_tool_calls),
        "text": _text_field(req),
        "top_p": _number(req.top_p, defaults.top_p),
        "presence_penalty": _number(getattr(req, "presence_penalty", None), defaults.presence_penalty),
        "frequency_penalty": _number(getattr(req, "frequency_penalty", None), defaults.frequency_penalty),
        "top_logprobs": _opt_int(getattr(req, "top_logprobs", None)) or 0,
        "temperature": _number(req.temperature, defaults.temperature),
        "reasoning": _reasoning_field(req),
        "usage": None,
        "max_output_tokens": req.max_output_tokens,
        "max_tool_calls": _opt_int(getattr(req, "max_tool_calls", None)),
        "store": bool(req.store),
        "background": bool(req.background),
        # `auto` (or nothing) resolves to the one tier the gateway has.
        "service_tier": "default",
        "metadata": dict(req.metadata),
        "safety_identifier": _opt_str(getattr(req, "safety_identifier", None)),
        "prompt_cache_key": _opt_str(getattr(req, "prompt_cache_key", None)),
        "conversation": {"id": conversation_id} if conversation_id else None,
        **({"client_metadata": req.client_metadata} if getattr(req, "client_metadata", None) else {}),
        **getattr(req, "late_fields_echo", {}),
    }


def mark_completed(response: dict[str, Any], dialect: Dialect, now: float) -> None:
    """Set ``completed_at`` (in the dialect's clock unit, the same as ``created_at``)."""
    response["completed_at"] = dialect.created_at(now)
