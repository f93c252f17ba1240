"""What an OpenAI-compatible server says about its context length, read once it answers (docs/security.md).

How this works: :func:`discover_context` asks the server the two places servers report it and records, on the
upstream, ``discovered_context`` (upstream model id -> tokens; ``"*"`` for a whole-server figure) and
``discovered_context_source`` (what said so, for error messages):

- ``GET {base_url}/models``: each model object's ``loaded_context_length`` (LM Studio: the context it was loaded
  with), ``max_model_len`` (vLLM's ``ModelCard``), ``context_length`` (LM Studio, OpenRouter and others),
  ``max_context_length`` (LM Studio: the model's maximum), first found wins;
- ``GET {root}/props`` (llama.cpp's server, at the root, not under ``/v1``): ``default_generation_settings.n_ctx``
  (the context of one slot, which is what one request gets), else a top-level ``n_ctx`` (older builds).

Best effort and bounded (``timeout`` per request, bodies up to 1 MiB): a server that reports nothing leaves the
limit to configuration (``context_length``) or to the server's own error.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import msgspec

from respstream.server.tls import client_tls_context
from respstream.server.upstream.tokenize import server_root

__all__ = ["CONTEXT_FIELDS", "context_from_model", "context_from_props", "discover_context"]

log = logging.getLogger("respstream.server")

CONTEXT_FIELDS = ("loaded_context_length", "max_model_len", "context_length", "max_context_length")
_MAX_BODY = 1 << 20


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_from_model(entry: Any) -> tuple[int, str] | None:
    """``(tokens, field)`` from one ``/v1/models`` object, or None."""
    if not isinstance(entry, dict):
        return None
    for name in CONTEXT_FIELDS:
        found = _positive(entry.get(name))
        if found is not None:
            return found, name
    return None


def context_from_props(props: Any) -> tuple[int, str] | None:
    """``(tokens, field)`` from llama.cpp's ``/props``, or None."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")) is not None:
        return settings["n_ctx"], "/props default_generation_settings.n_ctx"
    found = _positive(props.get("n_ctx"))
    return (found, "/props n_ctx") if found is not None else None


async def _get_json(client: httpx.AsyncClient, url: str) -> Any:
    try:
        response = await client.get(url)
    except httpx.HTTPError:
        return None
    if response.status_code != 200 or len(response.content) > _MAX_BODY:
        return None
    try:
        return msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return None


async def discover_context(upstream: Any, *, timeout: float = 3.0) -> dict[str, int]:
    """Fill ``upstream.discovered_context`` from what its server reports; returns it (empty when nothing was
    found, or the upstream is not an HTTP server). Never raises."""
    base_url = getattr(upstream, "base_url", None)
    found: dict[str, int] = {}
    sources: dict[str, str] = {}
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        return found
    headers = {k: v for k, v in dict(getattr(upstream, "_headers", {}) or {}).items()
               if k.lower() not in ("accept", "accept-encoding", "content-type")}  # its key and custom headers
    try:
        async with httpx.AsyncClient(headers={**headers, "accept": "application/json"}, trust_env=False,
                                     verify=client_tls_context(),
                                     timeout=httpx.Timeout(timeout)) as client:
            listing = await _get_json(client, f"{base_url}/models")
            items = listing.get("data") if isinstance(listing, dict) else None
            for entry in items if isinstance(items, list) else []:
                got = context_from_model(entry)
                if got is not None and isinstance(entry.get("id"), str):
                    found[entry["id"]], sources[entry["id"]] = got[0], f"GET /v1/models {got[1]}"
            props = await _get_json(client, f"{server_root(base_url)}/props")
            got = context_from_props(props)
            if got is not None:
                found["*"], sources["*"] = got
    except Exception as exc:  # discovery must never keep an upstream from serving
        log.info("upstream %s: context discovery failed: %s", getattr(upstream, "name", "?"), exc)
        return {}
    if found:
        upstream.discovered_context = found
        upstream.discovered_context_source = sources
        log.info("upstream %s reports its context: %s", getattr(upstream, "name", "?"),
                 ", ".join(f"{k} {v} ({sources[k]})" for k, v in found.items()))
    return found
