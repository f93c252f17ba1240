"""Build an :class:`Upstream` from a ``--upstream`` spec string.

- ``embedded`` / ``embedded:SIZE`` -> :class:`~respstream.server.upstream.embedded.adapter.EmbeddedUpstream` (llama.cpp
  in-process, through its Chat Completions API; ``SIZE`` = ``small`` | ``medium`` | ``large``, default the
  ``model_size`` option, else ``large``); ``responses+embedded[:SIZE]``: the same model through llama.cpp's own
  ``/v1/responses``; ``anthropic+embedded[:SIZE]``: through llama.cpp's ``/v1/messages`` and the Anthropic adapter
- ``http://host:port/v1`` / ``https://…`` -> probed at ``start()``: the upstream's own Responses API when it has one,
  else Chat Completions (:class:`~respstream.server.upstream.responses.adapter.ResponsesNativeUpstream` with
  ``api="auto"``); ``responses+http(s)://…`` -> its Responses API, no probe; ``chat+http(s)://…`` ->
  :class:`~respstream.server.upstream.chat.adapter.ChatCompletionsUpstream`
  (``name`` defaults to ``host:port``; ``models`` unset means discovered at ``start()``, listed under readable ids)
- ``anthropic+http(s)://host[:port]`` -> :class:`~respstream.server.upstream.anthropic.adapter.AnthropicUpstream`
  (the Messages API at ``{url}/v1/messages``; key from ``api_key`` or ``ANTHROPIC_API_KEY``)
- ``gemini+http(s)://HOST`` -> :class:`~respstream.server.upstream.gemini.GeminiUpstream` (Google's Gemini API)
- ``scripted:N[?delay_ms=D&tool=NAME&fail_at=K&reasoning=R&text=T]`` -> the SIMULATED
  :class:`~respstream.server.upstream.scripted.ScriptedUpstream`

``options`` are keyword arguments of the backend's constructor (``api_key``, ``models``, ``connect_timeout``,
``idle_timeout``, ``max_concurrency``, ``queue_timeout``, ``deadline``, ``retries``, …). Options a backend does not
take are ignored, so one shared options mapping can configure every upstream. ``options["per_upstream"]`` maps an
upstream's spec (as written) or name to options for that upstream alone (``api_key``, ``headers``...), applied over
the shared ones.
"""

from __future__ import annotations

import inspect
from typing import Any
from urllib.parse import urlsplit

from respstream.server.upstream.base import Upstream
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream
from respstream.server.upstream.scripted import ScriptedUpstream, parse_scripted_spec

__all__ = ["build_upstream"]


def _accepted(factory: type[Any], options: dict[str, Any]) -> dict[str, Any]:
    """The ``options`` a backend class takes (not None): the keyword parameters of its ``__init__`` and of its base
    classes' (an adapter passes its ``**options`` on to its base, e.g. the HTTP base's timeouts)."""
    names: set[str] = set()
    for cls in factory.__mro__:
        init = cls.__dict__.get("__init__")
        if init is not None and cls is not object:
            names.update(name for name, p in inspect.signature(init).parameters.items()
                         if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))
    names.discard("self")
    return {k: v for k, v in options.items() if k in names and v is not None}


def build_upstream(spec: str, *, name: str | None = None, **options: Any) -> Upstream:
    """Parse ``spec`` and build the upstream. Raises ValueError for a spec it cannot read (the message says why)."""
    spec = spec.strip()
    per_upstream = options.pop("per_upstream", None) or {}
    if not isinstance(per_upstream, dict):
        raise ValueError("upstream_options.per_upstream must be a table: upstream spec or name -> options")
    own = per_upstream.get(spec) or (per_upstream.get(name) if name else None)
    if own is None and "://" in spec:
        own = per_upstream.get(urlsplit(spec.split("+", 1)[-1]).netloc)
    if own is not None:
        if not isinstance(own, dict):
            raise ValueError(f"upstream_options.per_upstream[{spec!r}] must be a table of options")
        options = {**options, **own}
    api_of = {"responses+": "responses", "anthropic+": "anthropic"}
    kind = next((prefix for prefix in api_of if spec.startswith(prefix)), "")
    bare = spec.removeprefix(kind)
    if bare == "embedded" or bare.startswith("embedded:"):
        from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

        kwargs = _accepted(EmbeddedUpstream, options)
        kwargs["api"] = api_of.get(kind, "chat")
        if bare.startswith("embedded:"):
            kwargs["model_size"] = bare.split(":", 1)[1]
        if name:
            kwargs["name"] = name
        return EmbeddedUpstream(**kwargs)
    if spec.startswith("scripted"):
        kwargs = _accepted(ScriptedUpstream, options)
        kwargs.pop("name", None)
        kwargs.update(parse_scripted_spec(spec))
        return ScriptedUpstream(name=name or "scripted", **kwargs)
    if spec.startswith(("anthropic+http://", "anthropic+https://")):
        from respstream.server.upstream.anthropic.adapter import AnthropicUpstream

        url = spec.removeprefix("anthropic+")
        parts = urlsplit(url)
        if not parts.hostname:
            raise ValueError(f"upstream URL {url!r} has no host")
        kwargs = _accepted(AnthropicUpstream, options)  # (its own options and the HTTP base's)
        kwargs.pop("name", None)
        return AnthropicUpstream(url, name=name or parts.netloc, **kwargs)
    if spec.startswith(("gemini+http://", "gemini+https://")):
        from respstream.server.upstream.gemini import GeminiUpstream

        url = spec.removeprefix("gemini+")
        if not urlsplit(url).hostname:
            raise ValueError(f"upstream URL {spec!r} has no host")
        gemini = _accepted(GeminiUpstream, options)  # (its own options and the HTTP base's)
        gemini.pop("name", None)
        return GeminiUpstream(url, name=name or urlsplit(url).netloc, **gemini)
    api = "auto"
    for prefix in ("responses+", "chat+"):
        if spec.startswith(prefix):
            api, spec = prefix[:-1], spec[len(prefix) :]
    if spec.startswith(("http://", "https://")):
        parts = urlsplit(spec)
        if not parts.hostname:
            raise ValueError(f"upstream URL {spec!r} has no host")
        if api == "chat":
            kwargs = _accepted(ChatCompletionsUpstream, options)
            kwargs.pop("name", None)
            return ChatCompletionsUpstream(spec, name=name or parts.netloc, **kwargs)
        kwargs = _accepted(ResponsesNativeUpstream, options)
        kwargs.pop("name", None)
        kwargs.pop("api", None)
        return ResponsesNativeUpstream(spec, name=name or parts.netloc, api=api, **kwargs)
    raise ValueError(
        f"unknown upstream {spec!r}: use 'embedded' (or embedded:small|medium|large), an OpenAI-compatible base URL "
        "such as 'http://127.0.0.1:8000/v1' (probed for a Responses API; 'responses+http://…' or 'chat+http://…' "
        "choose), 'anthropic+https://api.anthropic.com' (the Messages API), or "
        "'scripted:N[?delay_ms=D&tool=NAME&fail_at=K&text=T]'"
    )
