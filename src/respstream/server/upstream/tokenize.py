"""Counting prompt tokens with a llama.cpp server's own tokenizer: ``POST /apply-template`` then ``/tokenize``.

How this works: ``/apply-template`` renders the chat messages with the model's chat template (exactly the prompt a
generation would see) and ``/tokenize`` counts it (``add_special``: the BOS token a generation adds too). Both are
llama.cpp server endpoints at the server's root (not under ``/v1``). Any other server (or an old llama.cpp) answers
404 or something unexpected: then :func:`count_with_llamacpp` returns None and the caller estimates.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

__all__ = ["count_with_llamacpp", "server_root"]


def server_root(base_url: str) -> str:
    """``http://host:port`` for ``http://host:port/v1`` (llama.cpp's own endpoints live at the root)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def count_with_llamacpp(client: httpx.AsyncClient, root: str, messages: list[dict[str, Any]],
                              extra_text: str = "") -> int | None:
    """Tokens of ``messages`` as templated by the server (+ ``extra_text``, e.g. tool schemas), or None."""
    try:
        templated = await client.post(f"{root}/apply-template", json={"messages": messages}, timeout=10.0)
        if templated.status_code != 200:
            return None
        prompt = msgspec.json.decode(templated.content).get("prompt")
        if not isinstance(prompt, str):
            return None
        counted = await client.post(f"{root}/tokenize", json={"content": prompt + extra_text, "add_special": True},
                                    timeout=10.0)
        if counted.status_code != 200:
            return None
        tokens = msgspec.json.decode(counted.content).get("tokens")
        return len(tokens) if isinstance(tokens, list) else None
    except (httpx.HTTPError, msgspec.DecodeError, AttributeError):
        return None
