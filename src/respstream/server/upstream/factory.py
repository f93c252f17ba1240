"""Build an :class:`Upstream` from a ``--upstream`` spec string.

- ``embedded`` / ``embedded:SIZE`` -> :class:`~respstream.server.upstream.embedded.EmbeddedUpstream` (llama.cpp
  in-process; ``SIZE`` = ``small`` | ``medium`` | ``large``, default the ``model_size`` option, else ``large``)
- ``http://host:port/v1`` / ``https://…`` ->
  :class:`~respstream.server.upstream.chat_completions.ChatCompletionsUpstream`
  (``name`` defaults to ``host:port``; ``models`` unset means discovered at ``start()``, listed under readable ids)
- ``scripted:N[?delay_ms=D&tool=NAME&fail_at=K&reasoning=R&text=T]`` -> the SIMULATED
  :class:`~respstream.server.upstream.scripted.ScriptedUpstream`

``options`` are keyword arguments of the backend's constructor (``api_key``, ``models``, ``connect_timeout``,
``idle_timeout``, ``max_concurrency``, ``queue_timeout``, ``deadline``, ``retries``, …). Options a backend does not
take are ignored, so one shared options mapping can configure every upstream.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from respstream.server.upstream.base import Upstream
from respstream.server.upstream.chat_completions import ChatCompletionsUpstream
from respstream.server.upstream.scripted import ScriptedUpstream, parse_scripted_spec

__all__ = ["build_upstream"]


def _accepted(factory: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return options
    return {k: v for k, v in options.items() if k in params and v is not None}


def build_upstream(spec: str, *, name: str | None = None, **options: Any) -> Upstream:
    """Parse ``spec`` and build the upstream. Raises ValueError for a spec it cannot read (the message says why)."""
    spec = spec.strip()
    if spec == "embedded" or spec.startswith("embedded:"):
        from respstream.server.upstream.embedded import EmbeddedUpstream

        kwargs = _accepted(EmbeddedUpstream, options)
        if spec.startswith("embedded:"):
            kwargs["model_size"] = spec.split(":", 1)[1]
        if name:
            kwargs["name"] = name
        return EmbeddedUpstream(**kwargs)
    if spec.startswith("scripted"):
        kwargs = _accepted(ScriptedUpstream, options)
        kwargs.pop("name", None)
        kwargs.update(parse_scripted_spec(spec))
        return ScriptedUpstream(name=name or "scripted", **kwargs)
    if spec.startswith(("http://", "https://")):
        parts = urlsplit(spec)
        if not parts.hostname:
            raise ValueError(f"upstream URL {spec!r} has no host")
        kwargs = _accepted(ChatCompletionsUpstream, options)
        kwargs.pop("name", None)
        return ChatCompletionsUpstream(spec, name=name or parts.netloc, **kwargs)
    raise ValueError(
        f"unknown upstream {spec!r}: use 'embedded' (or embedded:small|medium|large), an OpenAI-compatible base URL "
        "such as 'http://127.0.0.1:8000/v1', or 'scripted:N[?delay_ms=D&tool=NAME&fail_at=K&text=T]'"
    )
