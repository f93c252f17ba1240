"""A prompt over the model's context is a 400 ``context_length_exceeded`` before any stream (docs/security.md).

**The limit** of a routed ``(model id, upstream)``, first found wins (the error names which one it was):

1. ``[models] context_window`` for the model id or the upstream's name;
2. the upstream's ``context_length`` option (``[upstream_options."http://host:port/v1"] context_length = N``);
3. what the upstream's server reports (``upstream/context_discovery.py``: vLLM's ``max_model_len``, LM Studio's
   ``loaded_context_length`` / ``context_length``, llama.cpp's ``/props`` ``n_ctx``), for that model or the server;
4. the embedded model's ``n_ctx`` (``upstream_options.n_ctx``).

No limit: not checked here; the upstream's own error then ends the response.

**The count is a lower bound, so a prompt that fits is never refused.** Every whitespace-separated word of text is
at least one token in the BPE and SentencePiece tokenizers these servers use (their pre-tokenizers never merge
across whitespace), each message adds at least one token of chat template, and ``max_output_tokens`` is reserved
on top, as vLLM and OpenAI count it. The usual rule of thumb (UTF-8 bytes / 4, about English text's ratio) is an
*estimate*, not a bound (runs of spaces or repeated characters pack far more bytes per token), so it never refuses
by itself: when only it says "over", the upstream's own tokenizer counts exactly where it has one (the embedded
model and llama.cpp servers: ``/apply-template`` + ``/tokenize``), and otherwise the prompt goes through. Cost:
one linear pass over the text; the exact count is one request, only for prompts near or over the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.model_catalog import ModelCatalog

__all__ = ["ContextLimit", "check_context", "context_limit", "estimated_tokens", "sure_tokens"]


@dataclass(frozen=True, slots=True)
class ContextLimit:
    tokens: int
    setting: str  # where the figure comes from, in the words of the config file (shown in the error)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_limit(model_id: str, upstream: Any, catalog: ModelCatalog) -> ContextLimit | None:
    """The context of ``model_id`` served by ``upstream`` (see the module docstring for the order), or None."""
    name = str(getattr(upstream, "name", "upstream"))
    for key in (model_id, name):
        if key in catalog.context_window:
            return ContextLimit(catalog.context_window[key], f"models.context_window[{key!r}]")
    configured = _positive(getattr(upstream, "context_length", None))
    if configured is not None:
        return ContextLimit(configured, f"upstream_options context_length of upstream {name}")
    discovered = getattr(upstream, "discovered_context", None)
    if isinstance(discovered, dict) and discovered:
        own_id = upstream.upstream_model_id(model_id) if hasattr(upstream, "upstream_model_id") else model_id
        sources = getattr(upstream, "discovered_context_source", {}) or {}
        for key in (own_id, model_id, "*"):
            found = _positive(discovered.get(key))
            if found is not None:
                return ContextLimit(found, f"reported by upstream {name}: {sources.get(key, 'its server')}; "
                                           "override with upstream_options context_length")
    embedded = _positive(getattr(upstream, "context_tokens", None))
    if embedded is not None:
        return ContextLimit(embedded, f"upstream_options.n_ctx of upstream {name}")
    return None


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    texts = [content] if isinstance(content, str) else [
        str(part.get("text", "")) for part in content or () if isinstance(part, dict) and part.get("type") == "text"
    ] if isinstance(content, list) else []
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, dict) else {}
        texts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return texts


def sure_tokens(messages: list[dict[str, Any]]) -> int:
    """At least this many prompt tokens: one per whitespace-separated word, one per message."""
    return sum(1 + sum(len(text.split()) for text in _texts(m)) for m in messages)


def estimated_tokens(messages: list[dict[str, Any]]) -> int:
    """The rule-of-thumb count (UTF-8 bytes / 4, or the words when more): an estimate, never a bound."""
    return sum(1 + sum(max(len(text.encode()) // 4, len(text.split())) for text in _texts(m)) for m in messages)


def _refuse(tokens: int, how: str, reserve: int, limit: ContextLimit, model_id: str) -> HTTPError:
    reserved = f" + {reserve} reserved for max_output_tokens" if reserve else ""
    return HTTPError(
        400, "context_length_exceeded",
        f"The input is {how} {tokens} tokens{reserved}, over the context of model '{model_id}': {limit.tokens} "
        f"tokens (setting: {limit.setting}). Shorten the input or the conversation, lower max_output_tokens, or "
        "send truncation: \"auto\".",
        param="input", extra={"context_window": limit.tokens, "input_tokens_at_least": tokens},
    )


async def check_context(messages: list[dict[str, Any]], *, limit: ContextLimit | None, max_output_tokens: int | None,
                        upstream: Any, model_id: str) -> None:
    """Raise 400 ``context_length_exceeded`` when ``messages`` (+ ``max_output_tokens``) surely exceed ``limit``."""
    if limit is None:
        return
    reserve = max_output_tokens or 0
    sure = sure_tokens(messages)
    if sure + reserve > limit.tokens:
        raise _refuse(sure, "at least", reserve, limit, model_id)
    if estimated_tokens(messages) + reserve <= limit.tokens:
        return
    count = getattr(upstream, "count_tokens", None)  # near or over: the upstream's own tokenizer decides
    try:
        exact = await count(messages) if count is not None else None
    except Exception:  # a tokenizer that fails is no evidence: the prompt goes through
        exact = None
    if isinstance(exact, int) and exact + reserve > limit.tokens:
        raise _refuse(exact, "exactly (the upstream's tokenizer)", reserve, limit, model_id)
