"""What provider adapters (Gemini, Anthropic) share about the request they are given, beside the Chat shape.

- :data:`REASONING_KEY`: a message of the pipeline's Chat-style list that is not a Chat message but a ``reasoning``
  input item carrying ``encrypted_content`` (a provider's signed thinking, returned unchanged on the next turn):
  ``{"role": "assistant", "content": None, REASONING_KEY: {"encrypted_content": str, "summary": str}}``, in the
  history's order (server/inputs/history.py makes them). A provider adapter puts the signature back where it came
  from; every OpenAI-shaped upstream drops them (:func:`without_replayed_reasoning`): they never reach a Chat
  Completions or Responses server.
- :class:`RequestRefused`: a request field an adapter cannot honour; the service answers 400 ``unsupported_parameter``
  naming ``param`` before any stream starts (server/responses/upstream_check.py).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["REASONING_KEY", "RequestRefused", "without_replayed_reasoning"]

REASONING_KEY: Final = "respstream_reasoning"


class RequestRefused(ValueError):
    """A request an upstream cannot be given as it is: ``param`` names the request field (``input`` for history)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


def without_replayed_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without the reasoning entries (the same list when it has none: the usual case costs a scan)."""
    for message in messages:
        if REASONING_KEY in message:
            return [m for m in messages if REASONING_KEY not in m]
    return messages
