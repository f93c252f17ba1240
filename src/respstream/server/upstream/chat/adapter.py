"""Any OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp, Ollama, OpenAI) as an :class:`Upstream`.

How this works: :class:`ChatCompletionsUpstream` is the core's
:class:`~respstream.server.upstream.http.upstream.HttpUpstream` (connections, the concurrency slot, retries before the
first token, the deadline, the model list) speaking the Chat Completions API through :class:`ChatCompletionsAPI`: it
streams ``POST {base_url}/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``, decodes the
SSE ``data:`` payloads and turns each chunk into :mod:`~respstream.server.upstream.base` chunks through
:class:`~respstream.server.upstream.chat.stream.ChunkTranslator` (``<think>`` split live, tool-call fragments by
index, finish reason and usage mapped). Failures become :class:`UpstreamError`, with the codes listed in
:mod:`~respstream.server.upstream.http.failures`. :class:`ChatCompletionsAPI` works over any ``HttpUpstream``: the
native Responses adapter speaks it too, to a server without ``/responses`` (``api="auto"``).

With ``deadline_from_first_token`` (the embedded model) the deadline counts from the first token: reading the prompt
is bounded by the context size, not by time (a CPU model reads Codex CLI's first request for many minutes), and
the idle timer still ends a server that sends nothing at all. Both APIs keep an attempt's deadline the same way,
reads taken by the sink included (:mod:`~respstream.server.upstream.generation_deadline`).

``before_first_token`` is true while nothing has been yielded. Only then is a failed attempt retried (at most
``retries`` times, short backoff; 429 is never retried here: the router decides). Closing the iterator early closes
the HTTP response, which releases the connection and the slot.

Model ids: llama.cpp names its model after the GGUF file path. ``models`` holds readable ids (a path-like id becomes
its file name without ``.gguf``, see :mod:`~respstream.server.upstream.model_ids`); requests still send the id the
upstream reported (``upstream_model_id()``).

Extra API beyond :class:`Upstream` (the HTTP base's): ``await start()`` (fills ``models`` from
``GET {base_url}/models`` when none were configured; best effort), ``await list_models()`` (the upstream's own ids),
``upstream_model_id(model)`` and ``await settle()``. After ``[DONE]`` the rest of the body is read (in the background
if it is slow) so the connection goes back to the pool instead of being dropped
(:mod:`~respstream.server.upstream.http.connection_return`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import msgspec

from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink, UpstreamError
from respstream.server.upstream.chat.answer_filters import filtered_batches
from respstream.server.upstream.chat.reads import ChatBodyReader
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.chat_wire import build_request_body
from respstream.server.upstream.generation_deadline import untimed_margin
from respstream.server.upstream.http.stream import HTTPStreamError
from respstream.server.upstream.http.upstream import HttpUpstream

__all__ = ["ChatCompletionsAPI", "ChatCompletionsUpstream", "bearer_headers"]


def bearer_headers(api_key: str | None, headers: dict[str, str] | None) -> dict[str, str]:
    """``headers`` plus OpenAI's ``authorization: Bearer`` for ``api_key`` (when there is one)."""
    own = dict(headers or {})
    if api_key:
        own["authorization"] = f"Bearer {api_key}"
    return own


class ChatCompletionsAPI:
    """The Chat Completions API spoken over an :class:`HttpUpstream`'s transport, slot and retries: the request body,
    ``POST /chat/completions`` and the stream read through :class:`ChunkTranslator`.

    Answer-quality options (off unless configured; the embedded model turns them on): ``extra_body``, body fields
    merged under every request (e.g. llama.cpp's repeat_penalty; the request's own fields win), ``loop_guard`` and
    ``text_tool_calls`` (tool calls written as answer text: server/upstream/text_tool_calls.py);
    ``include_usage`` asks for the usage chunk.
    """

    __slots__ = ("extra_body", "include_usage", "loop_guard", "text_tool_calls")

    def __init__(self, *, include_usage: bool = True, extra_body: dict[str, Any] | None = None,
                 loop_guard: bool = False, text_tool_calls: bool = False) -> None:
        self.include_usage = include_usage
        self.extra_body = dict(extra_body or {})
        self.loop_guard = loop_guard
        self.text_tool_calls = text_tool_calls

    def batches(self, upstream: HttpUpstream, request: GenerationRequest, sink: ReadSink | None = None
                ) -> AsyncGenerator[list[Chunk], None]:
        """The chunks of one generation, one list per read of the upstream's body (every chunk that read completed;
        never empty): a consumer pays its per-step costs (a generator hop, a store append) once per read, not once
        per chunk. Nothing is held back to fill a batch. (The retrying generator itself, not a generator around it:
        every layer is one more hop per read, and a real model's stream is one read per token.) With ``sink``, reads
        of plain text may go to it instead, from the connection's data callback
        (:mod:`~respstream.server.upstream.chat.reads`)."""
        return upstream._with_retries(request, functools.partial(self.attempt, upstream, sink=sink))

    def attempt(self, upstream: HttpUpstream, request: GenerationRequest, deadline_at: float,
                sink: ReadSink | None = None) -> AsyncIterator[list[Chunk]]:
        if self.loop_guard or self.text_tool_calls:  # the answer filters work chunk by chunk
            return filtered_batches(self._attempt(upstream, request, ChunkTranslator(), deadline_at), request,
                                    loop_guard=self.loop_guard, text_tool_calls=self.text_tool_calls,
                                    count_tokens=upstream.count_tokens)
        return self._attempt(upstream, request, ChunkTranslator(), deadline_at, sink)

    async def _attempt(
        self, upstream: HttpUpstream, request: GenerationRequest, translator: ChunkTranslator, deadline_at: float,
        sink: ReadSink | None = None,
    ) -> AsyncGenerator[list[Chunk], None]:
        """One request; one list of chunks per read of the body (see :meth:`batches`), the reads of plain text to
        ``sink`` when there is one. (It drives the upstream's own transport: the protected calls are the HTTP
        base's attempt API.)"""
        loop = asyncio.get_running_loop()
        name = upstream.name
        model = upstream.upstream_model_id(request.model)
        fields = build_request_body(request, include_usage=self.include_usage, model=model,
                                    cache_fields=upstream.forward_cache_fields)
        body = msgspec.json.encode({**self.extra_body, **fields} if self.extra_body else fields)
        deadline = upstream._deadline(deadline_at)
        response = await upstream._open("/chat/completions", body, deadline.at)
        reader = ChatBodyReader(name, translator, sink)
        # (with a sink, the reads of plain text are taken from the socket's callback while this waits)
        next_read = response.read if sink is None else functools.partial(
            response.read_direct, deadline.watch(reader.take, lambda: reader.yielded))
        try:
            if response.status_code != 200:
                raise await upstream._status_error(response)
            untimed = untimed_margin(upstream.idle_timeout, direct=sink is not None)
            while True:
                if reader.pending is not None:  # a read the direct hook parsed and left for us
                    batch, error = reader.pending
                    reader.pending = None
                else:
                    try:
                        if deadline.at - loop.time() >= untimed:  # (when a wait needs no timer: generation_deadline)
                            raw = await next_read()
                        else:
                            async with asyncio.timeout_at(deadline.at):
                                raw = await next_read()
                    except TimeoutError:
                        raise UpstreamError(
                            "upstream_timeout",
                            f"{name}: generation deadline exceeded",
                            before_first_token=not reader.yielded,
                        ) from None
                    except HTTPStreamError as exc:
                        raise upstream._stream_error(exc, before_first_token=not reader.yielded) from None
                    if raw is None:
                        continue  # (the hook kept it: pending)
                    if not raw:
                        break
                    batch, error = reader.parse(raw)
                if batch:
                    if deadline.waiting:
                        deadline.first_out()
                    reader.yielded = True
                    yield batch
                if error is not None:
                    raise error
                if translator.done:
                    break
            reader.close()
            try:
                final = translator.finish()
            except ValueError as exc:
                raise UpstreamError("upstream_error", f"{name}: {exc}",
                                    before_first_token=not reader.yielded) from None
            if final:
                reader.yielded = True
                yield final
        finally:
            await upstream._end_response(response, clean=translator.done)


class ChatCompletionsUpstream(HttpUpstream):
    """Streams from ``{base_url}/chat/completions``. See the module docstring for errors and limits.

    Options: the HTTP base's (``models``, the timeouts, ``max_concurrency``, ``retries``, ``headers``...; see
    :class:`HttpUpstream`), ``api_key`` (sent as ``authorization: Bearer``) and :class:`ChatCompletionsAPI`'s
    (``include_usage``, ``extra_body``, ``loop_guard``, ``text_tool_calls``).
    """

    takes_read_sink = True  # the pipeline passes generate_batches a sink (see chat/reads.py)

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        include_usage: bool = True,
        extra_body: dict[str, Any] | None = None,
        loop_guard: bool = False,
        text_tool_calls: bool = False,
        **transport: Any,
    ) -> None:
        super().__init__(base_url, name=name, headers=bearer_headers(api_key, headers), **transport)
        self.api_key = api_key
        self.chat_api = ChatCompletionsAPI(include_usage=include_usage, extra_body=extra_body,
                                           loop_guard=loop_guard, text_tool_calls=text_tool_calls)

    def generate_batches(self, request: GenerationRequest, sink: ReadSink | None = None
                         ) -> AsyncGenerator[list[Chunk], None]:
        """The chunks of :meth:`generate`, one list per read of the upstream's body
        (:meth:`ChatCompletionsAPI.batches`). Raises :class:`UpstreamError` (codes in the module docstring)."""
        return self.chat_api.batches(self, request, sink)
