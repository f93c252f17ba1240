"""``truncation``: make the context fit the model's window before anything streams.

How this works: the context (Chat Completions messages) is measured with the router's rough token estimate (the
larger of words and characters / 4, plus :data:`MEDIA_TOKENS` per image/file part and a few tokens per message), and
``max_output_tokens`` is added when given. When the sum exceeds the model's window:

- ``disabled`` (the default, as OpenAI): 400 ``context_length_exceeded`` naming the window, before a response exists;
- ``auto``: the oldest turns are dropped (system/developer messages stay; an assistant tool-call message goes with
  its tool results, so no orphan result is left) until it fits; if even the last turn does not fit, the same 400.

A model whose window nobody configured (``[models] context_window``; the embedded model reports llama.cpp's
``n_ctx``) is left to the upstream, whose own error then ends the response. The estimate is deliberately rough and
linear in the context size.
"""

from __future__ import annotations

from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.routing.router import estimate_tokens

__all__ = ["MEDIA_TOKENS", "estimate_messages", "fit_context"]

MEDIA_TOKENS = 256  # what one image/file part is counted as (the upstream's real cost is not known here)
_PER_MESSAGE = 4  # role markers of a chat template


def _message_tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    total = _PER_MESSAGE
    if isinstance(content, str):
        total += estimate_tokens(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                total += estimate_tokens(str(part.get("text", "")))
            else:
                total += MEDIA_TOKENS
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        total += estimate_tokens(f"{function.get('name', '')} {function.get('arguments', '')}")
    return total


def estimate_messages(messages: list[dict[str, Any]]) -> int:
    return sum(_message_tokens(m) for m in messages)


def _too_long(needed: int, window: int, model: str) -> HTTPError:
    return HTTPError(400, "context_length_exceeded",
                     f"The input (about {needed} tokens, with max_output_tokens) exceeds the context window of model "
                     f"'{model}' ({window} tokens). Shorten the input or send truncation: \"auto\".",
                     param="input", extra={"context_window": window, "estimated_tokens": needed})


def fit_context(messages: list[dict[str, Any]], *, window: int | None, max_output_tokens: int | None,
                truncation: str, model: str) -> list[dict[str, Any]]:
    """``messages`` as they fit ``window`` (the same list when they do). Raises 400 ``context_length_exceeded``."""
    if window is None:
        return messages
    reserve = max_output_tokens or 0
    costs = [_message_tokens(m) for m in messages]
    needed = sum(costs) + reserve
    if needed <= window:
        return messages
    if truncation != "auto":
        raise _too_long(needed, window, model)
    keep = [True] * len(messages)
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if needed <= window:
            break
        if i >= last or message.get("role") in ("system", "tool") or not keep[i]:
            continue
        group = [i]
        if message.get("tool_calls"):  # its results go with it
            j = i + 1
            while j <= last and messages[j].get("role") == "tool":
                group.append(j)
                j += 1
            if group[-1] == last:
                continue  # the request continues these calls: they stay
        for j in group:
            keep[j] = False
            needed -= costs[j]
    if needed > window:
        raise _too_long(needed, window, model)
    return [m for m, k in zip(messages, keep, strict=True) if k]
