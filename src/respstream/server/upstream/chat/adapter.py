"""Any OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp, Ollama, OpenAI) as an :class:`Upstream`.

How this works: ``generate()`` waits for a slot (per-upstream concurrency limit with a bounded queue), streams
``POST {base_url}/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``, decodes the SSE
``data:`` payloads and turns each chunk into :mod:`~respstream.server.upstream.base` chunks through
:class:`~respstream.server.upstream.chat.stream.ChunkTranslator` (``<think>`` split live, tool-call fragments by index,
finish reason and usage mapped). Failures become :class:`UpstreamError`, with the codes listed in
:mod:`~respstream.server.upstream.http.failures`.

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

Extra API beyond :class:`Upstream`: ``await start()`` (fills ``models`` from ``GET {base_url}/models`` when none were
configured; best effort), ``await list_models()`` (the upstream's own ids), ``upstream_model_id(model)`` and
``await settle()``.

Connections: one :class:`~.http.stream.LeanHTTP` (HTTP/1.1, keep-alive; a body read is one socket callback, no
per-read timer: see that module for why) lives as long as the upstream; ``start()`` builds it (and ``GET /models``
leaves a warm connection in its pool). After ``[DONE]`` the rest of the body is read (in the background if it is
slow) so the connection goes back to the pool instead of being dropped
(:mod:`~respstream.server.upstream.http.connection_return`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import msgspec

from respstream.server.telemetry.observation import mark_upstream_phase
from respstream.server.telemetry.tracing import trace_headers
from respstream.server.tls import client_tls_context
from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink, UpstreamError, singles
from respstream.server.upstream.chat.answer_filters import filtered_batches
from respstream.server.upstream.chat.reads import ChatBodyReader
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.chat_wire import build_request_body, error_message
from respstream.server.upstream.generation_deadline import GenerationDeadline, untimed_margin
from respstream.server.upstream.http.connection_return import ConnectionReturn
from respstream.server.upstream.http.failures import status_failure, transport_failure
from respstream.server.upstream.http.stream import HTTPStreamError, LeanHTTP, StreamResponse
from respstream.server.upstream.model_ids import alias_models
from respstream.server.upstream.retries import RetryingUpstream
from respstream.server.upstream.tokenize import count_with_llamacpp, server_root

__all__ = ["ChatCompletionsUpstream"]

_MAX_MODELS_BODY = 8 << 20
_KEEPALIVE_EXPIRY = 4.0


class ChatCompletionsUpstream(RetryingUpstream):
    """Streams from ``{base_url}/chat/completions``. See the module docstring for errors and limits.

    ``models``: the model ids this upstream serves, as the upstream names them (path-like ids are listed under a
    readable id and sent as configured). ``None`` means "discover at ``start()``". Timeouts are seconds:
    ``connect_timeout`` for TCP/TLS, ``idle_timeout`` between two reads, ``deadline`` for one whole generation,
    ``queue_timeout`` to wait for one of ``max_concurrency`` slots.
    """

    forward_cache_fields = True  # the client's prompt-cache fields go upstream (chat_wire.py); embedded.py: off

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        api_key: str | None = None,
        models: list[str] | None = None,
        connect_timeout: float = 5.0,
        idle_timeout: float = 60.0,
        max_concurrency: int = 16,
        queue_timeout: float = 30.0,
        deadline: float = 600.0,
        retries: int = 2,
        retry_backoff: float = 0.1,
        include_usage: bool = True,
        headers: dict[str, str] | None = None,
        extra_body: dict[str, Any] | None = None,
        loop_guard: bool = False,
        text_tool_calls: bool = False,
        deadline_from_first_token: bool = False,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.name = name
        self._upstream_ids: dict[str, str] = alias_models(list(models or []))  # readable id -> upstream's id
        self.models: list[str] = list(self._upstream_ids)
        self._discover = models is None
        self.api_key = api_key
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.max_concurrency = max_concurrency
        self.queue_timeout = queue_timeout
        self.deadline = deadline
        self.deadline_from_first_token = deadline_from_first_token
        self.retries = max(0, retries)
        self.retry_backoff = retry_backoff
        self.include_usage = include_usage
        # Answer-quality options (off unless configured; the embedded model turns them on): body fields merged
        # under every request (e.g. llama.cpp's repeat_penalty; the request's own fields win), the loop guard, and
        # tool calls written as answer text (server/upstream/text_tool_calls.py).
        self.extra_body = dict(extra_body or {})
        self.loop_guard = loop_guard
        self.text_tool_calls = text_tool_calls
        # identity: compressing a token stream saves nothing and some servers buffer compressed output.
        self._headers = {
            "accept": "text/event-stream",
            "accept-encoding": "identity",
            "content-type": "application/json",
            **(headers or {}),
        }
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._lean_client: LeanHTTP | None = None
        self._lean_loop: asyncio.AbstractEventLoop | None = None
        self._returns = ConnectionReturn()  # responses finishing their body after [DONE]

    def __repr__(self) -> str:
        return f"ChatCompletionsUpstream({self.base_url!r}, name={self.name!r})"

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _lean(self) -> LeanHTTP:
        loop = asyncio.get_running_loop()  # connections belong to the loop that made them
        if self._lean_client is None or self._lean_loop is not loop:
            self._lean_client = LeanHTTP(connect_timeout=self.connect_timeout, idle_timeout=self.idle_timeout,
                                         keepalive_expiry=_KEEPALIVE_EXPIRY, max_idle_per_host=self.max_concurrency)
            self._lean_loop = loop
        return self._lean_client

    async def start(self) -> None:
        """Get ready before the first request: build the HTTP client (for https its TLS context) and discover
        ``models`` when none were configured, which also leaves a warm keep-alive connection in the pool.

        Never raises: an unreachable upstream stays model-less.
        """
        self._lean()
        if self._discover and not self.models:
            try:
                self._upstream_ids = alias_models(await self.list_models())
            except UpstreamError:
                return
            self.models = list(self._upstream_ids)

    async def count_tokens(self, messages: list[dict[str, Any]], extra_text: str = "") -> int | None:
        """Prompt tokens by the server's tokenizer where it has llama.cpp's endpoints (see upstream/tokenize.py);
        None when it has not (the caller then estimates)."""
        # Rare (input_tokens requests), so a short-lived httpx client rather than the lean streaming one.
        async with httpx.AsyncClient(headers=self._headers, trust_env=False, verify=client_tls_context(),
                                     timeout=httpx.Timeout(10.0, connect=self.connect_timeout)) as client:
            return await count_with_llamacpp(client, server_root(self.base_url), messages, extra_text)

    def upstream_model_id(self, model: str) -> str:
        """The id to send upstream for a model id of ours (readable -> what ``GET /models`` said)."""
        return self._upstream_ids.get(model, model)

    async def aclose(self) -> None:
        await self._returns.aclose()
        if self._lean_client is not None:
            lean, self._lean_client = self._lean_client, None
            await lean.aclose()

    async def list_models(self) -> list[str]:
        """``GET {base_url}/models`` -> ids. Raises :class:`UpstreamError` (same codes as ``generate``)."""
        headers = {**self._headers, "accept": "application/json"}
        headers.pop("content-type", None)
        try:
            response = await self._lean().request("GET", f"{self.base_url}{self.models_path}", b"", headers)
        except HTTPStreamError as exc:
            raise self._stream_error(exc, before_first_token=True) from exc
        try:
            content = await response.read_all(_MAX_MODELS_BODY)
        finally:
            await response.aclose()
        if response.status_code != 200:
            raise UpstreamError(
                "upstream_error",
                f"{self.name}: GET /models: HTTP {response.status_code}: {error_message(content)}",
                status=response.status_code,
            )
        try:
            data = msgspec.json.decode(content)
        except msgspec.DecodeError as exc:
            raise UpstreamError("upstream_error", f"{self.name}: GET /models: body is not JSON") from exc
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            return []
        return [str(m["id"]) for m in items if isinstance(m, dict) and isinstance(m.get("id"), str)]

    # -- generation ------------------------------------------------------------------------------------------

    async def _acquire(self) -> None:
        if not self._semaphore.locked():
            await self._semaphore.acquire()
            return
        try:
            async with asyncio.timeout(self.queue_timeout):
                await self._semaphore.acquire()
        except TimeoutError:
            raise UpstreamError(
                "rate_limited",
                f"{self.name}: upstream busy: {self.max_concurrency} generations running, "
                f"no slot within {self.queue_timeout:g} s",
                status=503,
                retry_after=max(1.0, self.queue_timeout),
            ) from None

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        """Stream chunks ending with one ``Finish``. Raises :class:`UpstreamError` (codes in the module docstring)."""
        async for batch in self.generate_batches(request):
            for chunk in singles(batch):
                yield chunk

    takes_read_sink = True  # the pipeline passes generate_batches a sink (see chat_reads); False: it never does
    models_path = "/models"  # (GET, under base_url: the model list)

    def generate_batches(self, request: GenerationRequest, sink: ReadSink | None = None
                         ) -> AsyncGenerator[list[Chunk], None]:
        """The chunks of :meth:`generate`, one list per read of the upstream's body (every chunk that read
        completed; never empty): a consumer pays its per-step costs (a generator hop, a store append) once per read,
        not once per chunk. Nothing is held back to fill a batch. (The retrying generator itself, not a generator
        around it: every layer is one more hop per read, and a real model's stream is one read per token.) With
        ``sink``, reads of plain text may go to it instead, from the connection's data callback
        (:mod:`~respstream.server.upstream.chat.reads`)."""
        return self._with_retries(request, functools.partial(self._chat_attempt, sink=sink))

    def _chat_attempt(self, request: GenerationRequest, deadline_at: float, sink: ReadSink | None = None
                      ) -> AsyncIterator[list[Chunk]]:
        if self.loop_guard or self.text_tool_calls:  # the answer filters work chunk by chunk
            return filtered_batches(self._attempt(request, ChunkTranslator(), deadline_at), request,
                                    loop_guard=self.loop_guard, text_tool_calls=self.text_tool_calls,
                                    count_tokens=self.count_tokens)
        return self._attempt(request, ChunkTranslator(), deadline_at, sink)

    async def _open(self, path: str, body: bytes, deadline_at: float) -> StreamResponse:
        """POST ``body`` to ``{base_url}{path}`` with the attempt's trace context; the response once its headers
        came. Raises :class:`UpstreamError` (deadline, connect and transport failures, before the first token)."""
        headers = self._headers
        traced = trace_headers()
        if traced:
            headers = {**headers, **traced}
        lean = self._lean()
        url = f"{self.base_url}{path}"
        try:
            # The post ends within two connects and two head waits (a stale kept-alive connection is retried once):
            # when the deadline is further off than that, it cannot pass here and needs no timer of its own.
            if deadline_at - asyncio.get_running_loop().time() > 2 * (self.connect_timeout + self.idle_timeout):
                response = await lean.post(url, body, headers)
            else:
                async with asyncio.timeout_at(deadline_at):
                    response = await lean.post(url, body, headers)
        except TimeoutError:
            raise UpstreamError("upstream_timeout", f"{self.name}: generation deadline exceeded") from None
        except HTTPStreamError as exc:
            raise self._stream_error(exc, before_first_token=True) from None
        mark_upstream_phase("connect")
        return response

    async def _attempt(
        self, request: GenerationRequest, translator: ChunkTranslator, deadline_at: float,
        sink: ReadSink | None = None,
    ) -> AsyncGenerator[list[Chunk], None]:
        """One request; one list of chunks per read of the body (see :meth:`generate_batches`), the reads of plain
        text to ``sink`` when there is one."""
        loop = asyncio.get_running_loop()
        model = self.upstream_model_id(request.model)
        fields = build_request_body(request, include_usage=self.include_usage, model=model,
                                    cache_fields=self.forward_cache_fields)
        body = msgspec.json.encode({**self.extra_body, **fields} if self.extra_body else fields)
        deadline = self._deadline(deadline_at)
        response = await self._open("/chat/completions", body, deadline.at)
        reader = ChatBodyReader(self.name, translator, sink)
        # (with a sink, the reads of plain text are taken from the socket's callback while this waits)
        next_read = response.read if sink is None else functools.partial(
            response.read_direct, deadline.watch(reader.take, lambda: reader.yielded))
        try:
            if response.status_code != 200:
                raise await self._status_error(response)
            untimed = untimed_margin(self.idle_timeout, direct=sink is not None)
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
                            f"{self.name}: generation deadline exceeded",
                            before_first_token=not reader.yielded,
                        ) from None
                    except HTTPStreamError as exc:
                        raise self._stream_error(exc, before_first_token=not reader.yielded) from None
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
                raise UpstreamError("upstream_error", f"{self.name}: {exc}",
                                    before_first_token=not reader.yielded) from None
            if final:
                reader.yielded = True
                yield final
        finally:
            await self._end_response(response, clean=translator.done)

    def _deadline(self, deadline_at: float) -> GenerationDeadline:
        """One attempt's deadline: ``deadline_at``, or from its first chunk out (``deadline_from_first_token``)."""
        return GenerationDeadline(asyncio.get_running_loop(), deadline_at, self.deadline,
                                  from_first_token=self.deadline_from_first_token)

    async def _release(self, response: StreamResponse) -> None:
        """After the stream's last event: give the connection back (http/connection_return.py)."""
        await self._returns.give_back(response)

    async def _end_response(self, response: StreamResponse, *, clean: bool) -> None:
        """After an attempt: a response read to its clean end gives its connection back; any other is closed
        (mid-stream or failed: the server may still be sending). Shared by every adapter's attempt."""
        if clean:
            await self._release(response)
        else:
            await response.aclose()

    async def settle(self) -> None:
        """Wait until finished generations have released their connections (tests, benchmarks). Never raises."""
        await self._returns.settle()

    async def _status_error(self, response: StreamResponse) -> UpstreamError:
        return await status_failure(self.name, response)

    def _stream_error(self, exc: HTTPStreamError, *, before_first_token: bool) -> UpstreamError:
        return transport_failure(exc, name=self.name, base_url=self.base_url, connect_timeout=self.connect_timeout,
                                 idle_timeout=self.idle_timeout, before_first_token=before_first_token)
