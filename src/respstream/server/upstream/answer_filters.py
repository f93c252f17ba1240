"""Optional stages between an upstream's chunk stream and the pipeline: text tool calls, then the loop guard.

Composed per generation by :func:`answer_filters` only when an upstream enables them, so an upstream without them
keeps its plain chunk path. Closing the filtered stream closes the upstream stream under it (so the loop guard's
early stop ends the HTTP response, and with it the generation).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from respstream.server.upstream.base import Chunk, GenerationRequest
from respstream.server.upstream.loop_guard import LoopGuard, guard_stream
from respstream.server.upstream.text_tool_calls import answered_calls, offered_functions, text_tool_call_stream

__all__ = ["answer_filters"]


async def answer_filters(
    chunks: AsyncGenerator[Chunk, None], request: GenerationRequest, *, loop_guard: bool, text_tool_calls: bool
) -> AsyncGenerator[Chunk, None]:
    """``chunks`` with the enabled stages applied (see the module docstring)."""
    async with aclosing(chunks):
        stream: AsyncIterator[Chunk] = chunks
        if text_tool_calls and request.tools and request.tool_choice != "none":
            functions = offered_functions(request.tools)
            if functions:
                stream = text_tool_call_stream(stream, functions, answered_calls(request.messages))
        if loop_guard:
            stream = guard_stream(stream, LoopGuard())
        async for chunk in stream:
            yield chunk
