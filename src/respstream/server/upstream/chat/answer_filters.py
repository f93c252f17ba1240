"""Optional stages between an upstream's chunk stream and the pipeline: text tool calls, then the loop guard.

Composed per generation by :func:`answer_filters` only when an upstream enables them, so an upstream without them
keeps its plain chunk path. The stages work chunk by chunk: :func:`filtered_batches` takes an upstream's batches
(one list per read) apart for them and gives every chunk out as a batch of one. Closing the filtered stream closes
the upstream stream under it (so the loop guard's early stop ends the HTTP response, and with it the generation).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from respstream.server.upstream.base import Chunk, GenerationRequest, singles
from respstream.server.upstream.chat.loop_guard import LoopGuard, guard_stream
from respstream.server.upstream.text_tool_calls import answered_calls, text_tool_call_stream
from respstream.server.upstream.tool_schemas import offered_functions

__all__ = ["answer_filters", "filtered_batches"]

CountTokens = Callable[[list[dict[str, Any]]], Awaitable[int | None]]


async def answer_filters(
    chunks: AsyncGenerator[Chunk, None], request: GenerationRequest, *, loop_guard: bool, text_tool_calls: bool,
    count_tokens: CountTokens | None = None,
) -> AsyncGenerator[Chunk, None]:
    """``chunks`` with the enabled stages applied (see the module docstring). ``count_tokens``: the upstream's own
    prompt-token count, asked only when the loop guard stops a generation (its usage chunk never comes then)."""
    async with aclosing(chunks):
        stream: AsyncIterator[Chunk] = chunks
        if text_tool_calls and request.tools and request.tool_choice != "none":
            functions = offered_functions(request.tools)
            if functions:
                stream = text_tool_call_stream(stream, functions, answered_calls(request.messages))
        if loop_guard:
            count_input = (lambda: count_tokens(request.messages)) if count_tokens is not None else None
            stream = guard_stream(stream, LoopGuard(), input_tokens=_estimated_prompt_tokens(request.messages),
                                  count_input=count_input)
        async for chunk in stream:
            yield chunk


def filtered_batches(
    batches: AsyncIterator[list[Chunk]], request: GenerationRequest, *, loop_guard: bool, text_tool_calls: bool,
    count_tokens: CountTokens | None = None,
) -> AsyncGenerator[list[Chunk], None]:
    """:func:`answer_filters` over ``batches``, its chunks given out one to a batch."""
    return _one_to_a_batch(answer_filters(_chunks(batches), request, loop_guard=loop_guard,
                                          text_tool_calls=text_tool_calls, count_tokens=count_tokens))


async def _chunks(batches: AsyncIterator[list[Chunk]]) -> AsyncGenerator[Chunk, None]:
    async with aclosing(batches):  # type: ignore[type-var]
        async for batch in batches:
            for chunk in singles(batch):
                yield chunk


async def _one_to_a_batch(chunks: AsyncGenerator[Chunk, None]) -> AsyncGenerator[list[Chunk], None]:
    async with aclosing(chunks):
        async for chunk in chunks:
            yield [chunk]


def _estimated_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """About four characters a token plus a few for each message's chat template (when the server cannot count)."""
    return sum(len(str(message.get("content") or "")) // 4 + 4 for message in messages)
