"""What every HTTP upstream adapter shares: :class:`HttpUpstream`, the base of the chat, responses, anthropic and
gemini families (each a thin translation between its provider's API and the core's chunks over this).

How this works: one :class:`~.stream.LeanHTTP` (HTTP/1.1, keep-alive; a body read is one socket callback, no
per-read timer: see that module for why) lives as long as the upstream and belongs to the event loop that built it;
``start()`` builds it and discovers ``models`` when none were configured (``GET {base_url}{models_path}``, which also
leaves a warm connection in the pool). ``max_concurrency`` slots with a bounded queue (``queue_timeout``; a full
queue is ``rate_limited`` 503) are held for a whole generation by the retry loop of
:class:`~respstream.server.upstream.retries.RetryingUpstream`, which retries an attempt that failed before its first
token (:meth:`_retryable`, :meth:`_retry_pause`: a family overrides just those). Failures become
:class:`~respstream.server.upstream.base.UpstreamError` through :mod:`.failures` (a family may override
:meth:`_status_error`). A response read to its clean end gives its connection back to the pool
(:mod:`.connection_return`); any other is closed.

What a family adds: ``generate_batches(request, sink=None)`` (its request body, path and stream reader, usually
``self._with_retries(request, attempt)`` with an attempt that calls :meth:`_open`, reads the response and ends with
:meth:`_end_response`), its auth headers, and where its API differs: ``list_models`` (this one reads the
``data[].id`` list that OpenAI's and Anthropic's ``GET /models`` share), ``count_tokens`` (this one asks the
server's llama.cpp endpoints), ``_retryable``, ``_status_error``.

Timeouts are seconds: ``connect_timeout`` for TCP/TLS, ``idle_timeout`` between two reads, ``deadline`` for one
whole generation (with ``deadline_from_first_token``, counted from the first chunk out:
:mod:`~respstream.server.upstream.generation_deadline`), ``queue_timeout`` to wait for a slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import msgspec

from respstream.server.telemetry.observation import mark_upstream_phase
from respstream.server.telemetry.tracing import trace_headers
from respstream.server.tls import client_tls_context
from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink, UpstreamError, singles
from respstream.server.upstream.chat_wire import error_message
from respstream.server.upstream.generation_deadline import GenerationDeadline
from respstream.server.upstream.http.connection_return import ConnectionReturn
from respstream.server.upstream.http.failures import status_failure, transport_failure
from respstream.server.upstream.http.stream import HTTPStreamError, LeanHTTP, StreamResponse
from respstream.server.upstream.model_ids import alias_models
from respstream.server.upstream.retries import RetryingUpstream
from respstream.server.upstream.tokenize import count_with_llamacpp, server_root

__all__ = ["HttpUpstream"]

_MAX_MODELS_BODY = 8 << 20
_KEEPALIVE_EXPIRY = 4.0


class HttpUpstream(RetryingUpstream):
    """The transport, limits, retries and model list of an HTTP upstream (module docstring); a family subclasses it.

    ``models``: the model ids this upstream serves, as the upstream names them (path-like ids are listed under a
    readable id and sent as configured: :mod:`~respstream.server.upstream.model_ids`). ``None`` means "discover at
    ``start()``". ``headers`` go with every request (a family puts its auth header here).
    """

    forward_cache_fields = True  # the client's prompt-cache fields go upstream (the embedded model turns it off)
    takes_read_sink = False  # True where generate_batches takes a ReadSink (the pipeline then may pass one)
    models_path = "/models"  # (GET, under base_url: the model list)

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        models: list[str] | None = None,
        connect_timeout: float = 5.0,
        idle_timeout: float = 60.0,
        max_concurrency: int = 16,
        queue_timeout: float = 30.0,
        deadline: float = 600.0,
        retries: int = 2,
        retry_backoff: float = 0.1,
        headers: dict[str, str] | None = None,
        deadline_from_first_token: bool = False,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.name = name
        self._upstream_ids: dict[str, str] = alias_models(list(models or []))  # readable id -> upstream's id
        self.models: list[str] = list(self._upstream_ids)
        self._discover = models is None
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.max_concurrency = max_concurrency
        self.queue_timeout = queue_timeout
        self.deadline = deadline
        self.deadline_from_first_token = deadline_from_first_token
        self.retries = max(0, retries)
        self.retry_backoff = retry_backoff
        # identity: compressing a token stream saves nothing and some servers buffer compressed output.
        self._headers = {
            "accept": "text/event-stream",
            "accept-encoding": "identity",
            "content-type": "application/json",
            **(headers or {}),
        }
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._lean_client: LeanHTTP | None = None
        self._lean_loop: asyncio.AbstractEventLoop | None = None
        self._returns = ConnectionReturn()  # responses finishing their body after their stream's end

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r}, name={self.name!r})"

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
        """The id to send upstream for a model id of ours (readable -> what the model list said)."""
        return self._upstream_ids.get(model, model)

    async def aclose(self) -> None:
        await self._returns.aclose()
        if self._lean_client is not None:
            lean, self._lean_client = self._lean_client, None
            await lean.aclose()

    async def settle(self) -> None:
        """Wait until finished generations have released their connections (tests, benchmarks). Never raises."""
        await self._returns.settle()

    async def _get_json(self, url: str) -> tuple[StreamResponse, bytes]:
        """``GET url`` asking for JSON (the upstream's own headers, no content-type) -> the response, already closed,
        and its body (at most 8 MiB). Raises :class:`UpstreamError` for a failed connection."""
        headers = {**self._headers, "accept": "application/json"}
        headers.pop("content-type", None)
        try:
            response = await self._lean().request("GET", url, b"", headers)
        except HTTPStreamError as exc:
            raise self._stream_error(exc, before_first_token=True) from exc
        try:
            content = await response.read_all(_MAX_MODELS_BODY)
        finally:
            await response.aclose()
        return response, content

    async def list_models(self) -> list[str]:
        """``GET {base_url}{models_path}`` -> the ``data[].id`` list. Raises :class:`UpstreamError` (same codes as
        ``generate``)."""
        response, content = await self._get_json(f"{self.base_url}{self.models_path}")
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

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        """Stream chunks ending with one ``Finish``. Raises :class:`UpstreamError`."""
        async for batch in self.generate_batches(request):
            for chunk in singles(batch):
                yield chunk

    def generate_batches(self, request: GenerationRequest, sink: ReadSink | None = None
                         ) -> AsyncGenerator[list[Chunk], None]:
        """The chunks of :meth:`generate`, one non-empty list per read of the upstream's body: the family's API."""
        raise NotImplementedError

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

    def _deadline(self, deadline_at: float) -> GenerationDeadline:
        """One attempt's deadline: ``deadline_at``, or from its first chunk out (``deadline_from_first_token``)."""
        return GenerationDeadline(asyncio.get_running_loop(), deadline_at, self.deadline,
                                  from_first_token=self.deadline_from_first_token)

    async def _end_response(self, response: StreamResponse, *, clean: bool) -> None:
        """After an attempt: a response read to its clean end gives its connection back (connection_return.py); any
        other is closed (mid-stream or failed: the server may still be sending)."""
        if clean:
            await self._returns.give_back(response)
        else:
            await response.aclose()

    async def _status_error(self, response: StreamResponse) -> UpstreamError:
        return await status_failure(self.name, response)

    def _stream_error(self, exc: HTTPStreamError, *, before_first_token: bool) -> UpstreamError:
        return transport_failure(exc, name=self.name, base_url=self.base_url, connect_timeout=self.connect_timeout,
                                 idle_timeout=self.idle_timeout, before_first_token=before_first_token)
