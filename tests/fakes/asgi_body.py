"""The whole body of an ASGI HTTP request, for the SIMULATED servers written as bare ASGI apps."""

from __future__ import annotations

from typing import Any

__all__ = ["request_body"]


async def request_body(receive: Any) -> bytes:
    """Every ``http.request`` message's body, joined, up to the one without ``more_body``."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
