"""The events of a SIMULATED Responses stream that answers one text message, for the benchmarks' stand-in upstreams
(fake_upstreams.py serves them over HTTP, native_upstream.py hands them to the adapters a read at a time). Each
caller frames and numbers them as its upstream does."""

from __future__ import annotations

from typing import Any

__all__ = ["text_response_events"]


def text_response_events(response: dict[str, Any], item_id: str, words: list[str],
                         usage: dict[str, Any]) -> list[dict[str, Any]]:
    """``response.created`` to ``response.completed`` for ``response`` (in progress, no output yet) answering the
    message ``item_id`` whose text is ``words``, one ``response.output_text.delta`` a word; the completed response
    carries ``usage``."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}},
        {"type": "response.content_part.added", "item_id": item_id, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "text": "", "annotations": []}},
    ]
    events += [{"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0,
                "delta": word, "logprobs": []} for word in words]
    text = "".join(words)
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
    events += [
        {"type": "response.output_text.done", "item_id": item_id, "output_index": 0, "content_index": 0,
         "text": text},
        {"type": "response.content_part.done", "item_id": item_id, "output_index": 0, "content_index": 0,
         "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {**response, "status": "completed", "output": [item],
                                                    "usage": usage}},
    ]
    return events
