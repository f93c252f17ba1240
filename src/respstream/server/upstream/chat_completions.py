"""Any OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp, Ollama, OpenAI) as an :class:`Upstream`.

How this works: ``generate()`` waits for a slot (per-upstream concurrency limit with a bounded queue), streams
``POST {base_url}/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``, decodes the SSE
``data:`` payloads and turns each chunk into :mod:`~respstream.server.upstream.base` chunks through
:class:`~respstream.server.upstream.chunks.ChunkTranslator` (``<think>`` split live, tool-call fragments by index,
finish reason and usage mapped). Failures become :class:`UpstreamError`:

=========================  ==================================================================================
``upstream_timeout``       connect timeout, idle timeout (no bytes for ``idle_timeout`` s), generation deadline
``upstream_unavailable``   connection refused / DNS failure
``upstream_error``         5xx or other non-200 status, malformed chunk, an ``error`` payload, connection reset,
                           stream ended before a finish reason
``rate_limited``           HTTP 429 (``retry_after`` kept from ``Retry-After``), or this upstream's queue is full
                           (waited ``queue_timeout`` s for a slot; message says "busy")
=========================  ==================================================================================

``before_first_token`` is true while nothing has been yielded. Only then is a failed attempt retried (at most
``retries`` times, short backoff; 429 is never retried here: the router decides). Closing the iterator early closes
the HTTP response, which releases the connection and the slot.

Model ids: llama.cpp names its model after the GGUF file path. ``models`` holds readable ids (a path-like id becomes
its file name without ``.gguf``, see :mod:`~respstream.server.upstream.model_ids`); requests still send the id the
upstream reported (``upstream_model_id()``).

Extra API beyond :class:`Upstream`: ``await start()`` (fills ``models`` from ``GET {base_url}/models`` when none were
configured; best effort), ``await list_models()`` (the upstream's own ids) and ``upstream_model_id(model)``.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import msgspec

from respstream.errors import BadInputError
from respstream.protocol.sse import SSEDecoder
from respstream.server.upstream.base import Chunk, GenerationRequest, UpstreamError
from respstream.server.upstream.chunks import ChunkTranslator
from respstream.server.upstream.model_ids import alias_models

__all__ = ["ChatCompletionsUpstream", "build_request_body", "parse_retry_after"]

_RETRYABLE = {"upstream_unavailable", "upstream_error", "upstream_timeout"}
_MAX_ERROR_BODY = 64 * 1024


def build_request_body(
    request: GenerationRequest, *, include_usage: bool = True, model: str | None = None
) -> dict[str, Any]:
    """The JSON body for a streaming Chat Completions call (``model`` overrides ``request.model``)."""
    body: dict[str, Any] = {"model": model or request.model, "messages": request.messages, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date); ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(body: bytes) -> str:
    """The human part of an upstream error body (OpenAI ``{"error": {"message"}}``, ``{"detail"}``, or text)."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body[:300].decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return body[:300].decode("utf-8", "replace").strip()


class ChatCompletionsUpstream:
    """Streams from ``{base_url}/chat/completions``. See the module docstring for errors and limits.

    ``models``: the model ids this upstream serves, as the upstream names them (path-like ids are listed under a
    readable id and sent as configured). ``None`` means "discover at ``start()``". Timeouts are seconds:
    ``connect_timeout`` for TCP/TLS, ``idle_timeout`` between two reads, ``deadline`` for one whole generation,
    ``queue_timeout`` to wait for one of ``max_concurrency`` slots.
    """

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
        self.retries = max(0, retries)
        self.retry_backoff = retry_backoff
        self.include_usage = include_usage
        self._headers = {"accept": "text/event-stream", "content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"ChatCompletionsUpstream({self.base_url!r}, name={self.name!r})"

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        # One client per event loop: an AsyncClient's pool is bound to the loop that first used it.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            timeout = httpx.Timeout(connect=self.connect_timeout, read=self.idle_timeout, write=30.0, pool=None)
            limits = httpx.Limits(
                max_connections=self.max_concurrency + 4, max_keepalive_connections=self.max_concurrency
            )
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits, headers=self._headers, trust_env=False)
            self._client_loop = loop
        return self._client

    async def start(self) -> None:
        """Discover ``models`` when none were configured. Never raises: an unreachable upstream stays model-less."""
        if self._discover and not self.models:
            try:
                self._upstream_ids = alias_models(await self.list_models())
            except UpstreamError:
                return
            self.models = list(self._upstream_ids)

    def upstream_model_id(self, model: str) -> str:
        """The id to send upstream for a model id of ours (readable -> what ``GET /models`` said)."""
        return self._upstream_ids.get(model, model)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.aclose()
            except RuntimeError:
                pass  # its loop is already gone; nothing left to release

    async def list_models(self) -> list[str]:
        """``GET {base_url}/models`` -> ids. Raises :class:`UpstreamError` (same codes as ``generate``)."""
        try:
            response = await self._http().get(f"{self.base_url}/models", headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, before_first_token=True) from exc
        if response.status_code != 200:
            raise UpstreamError(
                "upstream_error",
                f"{self.name}: GET /models: HTTP {response.status_code}: {_error_message(response.content)}",
                status=response.status_code,
            )
        try:
            data = msgspec.json.decode(response.content)
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
        loop = asyncio.get_running_loop()
        deadline_at = loop.time() + self.deadline
        await self._acquire()
        try:
            attempt = 0
            while True:
                translator = ChunkTranslator()
                try:
                    async for chunk in self._attempt(request, translator, deadline_at):
                        yield chunk
                    return
                except UpstreamError as exc:
                    retry = (
                        exc.before_first_token
                        and exc.code in _RETRYABLE
                        and attempt < self.retries
                        and (exc.status is None or exc.status >= 500)
                        and not exc.message.endswith("deadline exceeded")
                    )
                    if not retry:
                        raise
                    attempt += 1
                    pause = self.retry_backoff * (2 ** (attempt - 1))
                    if loop.time() + pause >= deadline_at:
                        raise
                    await asyncio.sleep(pause)
        finally:
            self._semaphore.release()

    async def _attempt(
        self, request: GenerationRequest, translator: ChunkTranslator, deadline_at: float
    ) -> AsyncGenerator[Chunk, None]:
        client = self._http()
        body = msgspec.json.encode(
            build_request_body(request, include_usage=self.include_usage, model=self.upstream_model_id(request.model))
        )
        http_request = client.build_request("POST", f"{self.base_url}/chat/completions", content=body)
        try:
            async with asyncio.timeout_at(deadline_at):
                response = await client.send(http_request, stream=True)
        except TimeoutError:
            raise UpstreamError("upstream_timeout", f"{self.name}: generation deadline exceeded") from None
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, before_first_token=True) from exc
        yielded = False
        try:
            if response.status_code != 200:
                raise await self._status_error(response)
            decoder = SSEDecoder()
            byte_iter = response.aiter_bytes()
            while True:
                try:
                    async with asyncio.timeout_at(deadline_at):
                        raw = await anext(byte_iter)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise UpstreamError(
                        "upstream_timeout",
                        f"{self.name}: generation deadline exceeded",
                        before_first_token=not yielded,
                    ) from None
                except httpx.HTTPError as exc:
                    raise self._transport_error(exc, before_first_token=not yielded) from exc
                try:
                    decoder.feed(raw)
                except BadInputError as exc:  # an oversized event: the upstream is broken, not the client
                    raise UpstreamError(
                        "upstream_error", f"{self.name}: bad event stream: {exc}", before_first_token=not yielded
                    ) from None
                for message in decoder.events():
                    if message.event == "error":
                        raise UpstreamError(
                            "upstream_error",
                            f"{self.name}: error event: {_error_message(message.data)}",
                            before_first_token=not yielded,
                        )
                    try:
                        chunks = translator.feed(message.data)
                    except ValueError as exc:
                        raise UpstreamError(
                            "upstream_error", f"{self.name}: {exc}", before_first_token=not yielded
                        ) from None
                    for chunk in chunks:
                        yielded = True
                        yield chunk
                    if translator.done:
                        break
                if translator.done:
                    break
            decoder.close()
            try:
                final = translator.finish()
            except ValueError as exc:
                raise UpstreamError("upstream_error", f"{self.name}: {exc}", before_first_token=not yielded) from None
            for chunk in final:
                yielded = True
                yield chunk
        finally:
            await response.aclose()

    async def _status_error(self, response: httpx.Response) -> UpstreamError:
        body = b""
        try:
            async for part in response.aiter_bytes():
                body += part
                if len(body) > _MAX_ERROR_BODY:
                    break
        except httpx.HTTPError:
            pass
        status = response.status_code
        message = f"{self.name}: HTTP {status}: {_error_message(body)}"
        if status == 429:
            return UpstreamError(
                "rate_limited",
                message,
                status=status,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
            )
        return UpstreamError("upstream_error", message, status=status)

    def _transport_error(self, exc: httpx.HTTPError, *, before_first_token: bool) -> UpstreamError:
        if isinstance(exc, httpx.ConnectTimeout):
            return UpstreamError(
                "upstream_timeout",
                f"{self.name}: connect timeout after {self.connect_timeout:g} s",
                before_first_token=before_first_token,
            )
        if isinstance(exc, httpx.TimeoutException):
            return UpstreamError(
                "upstream_timeout",
                f"{self.name}: no data for {self.idle_timeout:g} s (idle timeout)",
                before_first_token=before_first_token,
            )
        if isinstance(exc, httpx.ConnectError):
            return UpstreamError(
                "upstream_unavailable",
                f"{self.name}: cannot connect to {self.base_url}: {exc or type(exc).__name__}",
                before_first_token=before_first_token,
            )
        return UpstreamError(
            "upstream_error",
            f"{self.name}: connection failed mid-stream ({type(exc).__name__}: {exc})",
            before_first_token=before_first_token,
        )
