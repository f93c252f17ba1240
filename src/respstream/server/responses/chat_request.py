"""The Responses request fields an upstream gets, in their Chat Completions names (``GenerationRequest.options``).

How this works: :func:`chat_options` maps every field the gateway forwards (docs/compatibility.md, "forwarded")
to the Chat Completions body field of the same meaning:

==========================================  ==========================================================
Responses                                   Chat Completions
==========================================  ==========================================================
``top_p``                                   ``top_p``
``presence_penalty`` / ``frequency_penalty``  same names
``top_logprobs`` / ``include`` logprobs     ``logprobs: true`` + ``top_logprobs``
``reasoning.effort``                        ``reasoning_effort``
``text.format`` json_schema / json_object   ``response_format`` (``{"type": "json_schema", "json_schema": {...}}``)
``text.verbosity``                          ``verbosity``
``parallel_tool_calls``                     ``parallel_tool_calls`` (only when tools are offered)
``prompt_cache_key``                        ``prompt_cache_key``
``safety_identifier``                       ``safety_identifier``
``service_tier``                            ``service_tier``
``user``                                    ``user``
==========================================  ==========================================================

``model``, ``messages``, ``tools``, ``tool_choice``, ``max_output_tokens`` (``max_tokens``) and ``temperature``
are first-class fields of :class:`~respstream.server.upstream.base.GenerationRequest`. A field the request did not
give is left out, so the upstream's own default applies.
"""

from __future__ import annotations

from typing import Any

from respstream.server.inputs.prompt_cache import CACHE_TTLS
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.upstream.cache_hints import CacheHints

__all__ = ["cache_hints", "chat_options"]


def chat_options(request: ResponseRequest, *, tools_offered: bool) -> dict[str, Any]:
    """The extra Chat Completions body fields for one generation of ``request``."""
    o = request.options
    body: dict[str, Any] = {}
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if o.presence_penalty is not None:
        body["presence_penalty"] = o.presence_penalty
    if o.frequency_penalty is not None:
        body["frequency_penalty"] = o.frequency_penalty
    if o.logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = o.top_logprobs or 0
    if o.reasoning_effort is not None:
        body["reasoning_effort"] = o.reasoning_effort
    response_format = o.text_format.response_format()
    if response_format is not None:
        body["response_format"] = response_format
    if o.verbosity is not None:
        body["verbosity"] = o.verbosity
    if tools_offered:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    for key in ("prompt_cache_key", "safety_identifier", "service_tier", "user"):
        value = getattr(o, key)
        if value is not None:
            body[key] = value
    return body


def cache_hints(request: ResponseRequest) -> CacheHints:
    """What ``request`` asked of prompt caching, for the adapters (upstream/cache_hints.py). A lifetime counts as
    asked for when ``prompt_cache_options.ttl`` or ``prompt_cache_retention: 24h`` gave it (``in_memory`` names the
    default policy, so the upstream's own default applies)."""
    o = request.options
    cache = o.prompt_cache
    ttl = CACHE_TTLS[cache.ttl] if cache.ttl is not None else (24 * 3600 if cache.retention == "24h" else None)
    wire = cache.echo() if cache.options_given or cache.retention is not None else {}
    if cache.options_given and cache.ttl is None:  # (forwarded as sent: the upstream applies its own default ttl)
        wire["prompt_cache_options"] = {"mode": cache.mode}
    asked = bool(o.prompt_cache_key) or cache.options_given or cache.retention is not None
    return CacheHints(asked=asked, mode=cache.mode, ttl_seconds=ttl, wire=wire)
