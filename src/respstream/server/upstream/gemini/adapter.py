"""Google's Gemini API (``gemini+http(s)://HOST``) as an :class:`~respstream.server.upstream.base.Upstream`: the
thin IO half over gemini/request.py (what is sent), gemini/reads.py and gemini/stream.py (what comes back).

How this works: ``generate_batches()`` posts ``{base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` with the
key in ``x-goog-api-key`` (from ``api_key`` in the config, else ``GEMINI_API_KEY``; never logged, never in a message
or ``repr``), and hands each read of the body to :class:`~respstream.server.upstream.gemini.reads.GeminiBody`
(SSE framing and JSON) over :class:`~respstream.server.upstream.gemini.stream.GeminiStream` (the state machine); one
list of chunks per read, read without a timer while the deadline is further off than the idle timeout (the lean
client's idle timer bounds each wait), as the Chat Completions adapter reads. Connections, the
concurrency limit, the retrying generator, the deadline and the idle timeout are the HTTP base's
(:class:`~respstream.server.upstream.http.upstream.HttpUpstream`, which this class extends, as every HTTP family
does).

Failures (:class:`~respstream.server.upstream.base.UpstreamError`): 401/403 -> ``upstream_auth`` (the key was
refused; never retried); 429 -> ``rate_limited`` with ``retry_after`` from ``Retry-After`` or the body's
``RetryInfo.retryDelay``; 5xx (503 ``UNAVAILABLE``: overloaded) -> ``upstream_error``. A 429 or a 5xx before the
first chunk is retried up to ``retries`` times, waiting ``Retry-After`` when it is at most ``max_retry_wait`` seconds
(else the error goes to the router at once, which fails over to the route's next upstream). Other 4xx are the
request's fault and are not retried; their message is Gemini's own.

``models``: configured, else ``GET {base}/v1beta/models`` at ``start()`` (the ids that can ``generateContent``, without
the ``models/`` prefix; at most 20 pages), which also gives each model's context (``inputTokenLimit`` +
``outputTokenLimit``) to the gateway's context check.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import Any, Final
from urllib.parse import quote

import msgspec

from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink, UpstreamError
from respstream.server.upstream.chat_wire import error_message, parse_retry_after
from respstream.server.upstream.gemini.reads import GeminiBody
from respstream.server.upstream.gemini.request import build_body, gemini_tool_names
from respstream.server.upstream.gemini.stream import GeminiStream
from respstream.server.upstream.generation_deadline import untimed_margin
from respstream.server.upstream.http.stream import HTTPStreamError, StreamResponse
from respstream.server.upstream.http.upstream import HttpUpstream
from respstream.server.upstream.provider_tools import RefusedField, refused_as_http

__all__ = ["GeminiUpstream"]

_API: Final = "/v1beta"
_MAX_ERROR_BODY: Final = 64 * 1024
_MAX_MODEL_PAGES: Final = 20
_WINDOW_SOURCE: Final = "GET /v1beta/models inputTokenLimit + outputTokenLimit"


class GeminiUpstream(HttpUpstream):
    """Streams from Gemini's ``streamGenerateContent`` (module docstring). Options: the HTTP base's (see
    :class:`HttpUpstream`), ``api_key`` (``x-goog-api-key``) and ``max_retry_wait``."""

    provider = "gemini"
    input_modalities = ("text", "image", "file")  # (Gemini models read images and PDFs; [models] can narrow it)
    takes_read_sink = False  # (no direct-read lane: every read goes through the state machine)

    def __init__(self, base_url: str, *, name: str, api_key: str | None = None, max_retry_wait: float = 5.0,
                 headers: dict[str, str] | None = None, **options: Any) -> None:
        key = api_key or os.environ.get("GEMINI_API_KEY") or None
        own = {**(headers or {})}
        if key:
            own["x-goog-api-key"] = key
        super().__init__(base_url.rstrip("/").removesuffix(_API), name=name, headers=own, **options)
        self.max_retry_wait = max_retry_wait
        self._names = gemini_tool_names()  # (one per upstream: a safe name maps back in every later request)

    def __repr__(self) -> str:
        return f"GeminiUpstream({self.base_url!r}, name={self.name!r})"

    # -- models ------------------------------------------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """``GET {base}/v1beta/models`` (every page) -> the ids that generate content. Raises :class:`UpstreamError`."""
        found: list[str] = []
        context: dict[str, int] = {}
        token: Any = ""
        for _page in range(_MAX_MODEL_PAGES):
            url = f"{self.base_url}{_API}/models" + (f"?pageToken={quote(token, safe='')}" if token else "")
            response, content = await self._get_json(url)
            if response.status_code != 200:
                raise self._failure(response.status_code, content, response.headers.get("retry-after"),
                                     "GET /v1beta/models: ")
            try:
                data = msgspec.json.decode(content)
            except msgspec.DecodeError as exc:
                raise UpstreamError("upstream_error", f"{self.name}: GET /v1beta/models: body is not JSON") from exc
            for model in data.get("models") or () if isinstance(data, dict) else ():
                if not isinstance(model, dict) or not isinstance(model.get("name"), str):
                    continue
                methods = model.get("supportedGenerationMethods")
                if isinstance(methods, list) and "generateContent" not in methods \
                        and "streamGenerateContent" not in methods:
                    continue
                model_id = model["name"].removeprefix("models/")
                found.append(model_id)
                window = _window(model)
                if window is not None:
                    context[model_id] = window
            token = data.get("nextPageToken") if isinstance(data, dict) else None
            if not isinstance(token, str) or not token:
                break
        if context:  # (server/inputs/context_limit.py reads these: a prompt surely too long is a 400 before streaming)
            self.discovered_context = context
            self.discovered_context_source = dict.fromkeys(context, _WINDOW_SOURCE)
        return found

    async def count_tokens(self, messages: list[dict[str, Any]], extra_text: str = "") -> int | None:
        """None: the caller estimates (the HTTP base's llama.cpp ``/apply-template`` is no Gemini endpoint, and
        the prompt must not go to a path of Gemini's host that is not the API's)."""
        return None

    # -- generation --------------------------------------------------------------------------------------------

    def check_request(self, request: GenerationRequest) -> None:
        """Raise :class:`~respstream.server.http_errors.HTTPError` 400 naming the field (before any stream) for what
        Gemini cannot take (server/responses/route_decision.py calls this)."""
        try:
            build_body(request, gemini_tool_names())
        except RefusedField as exc:
            raise refused_as_http(exc, "Gemini") from None

    def generate_batches(self, request: GenerationRequest, sink: ReadSink | None = None
                         ) -> AsyncGenerator[list[Chunk], None]:
        """Chunks ending with one ``Finish``, one list per read. Raises :class:`UpstreamError`."""
        return self._with_retries(request, self._gemini_attempt)

    def _retryable(self, exc: UpstreamError) -> bool:
        """A 429 or 5xx before the first chunk, when its ``Retry-After`` (if any) is short enough to wait here."""
        if not exc.before_first_token or exc.status is None:
            return exc.before_first_token and exc.code in ("upstream_unavailable", "upstream_timeout") \
                and not exc.message.endswith("deadline exceeded")
        if exc.status == 429 or exc.status >= 500:
            return exc.retry_after is None or exc.retry_after <= self.max_retry_wait
        return False

    def _retry_pause(self, exc: UpstreamError, attempt: int) -> float:
        """``Retry-After`` when given (at most ``max_retry_wait``: :meth:`_retryable`), else a doubling backoff."""
        return exc.retry_after if exc.retry_after is not None else self.retry_backoff * 2.0 ** (attempt - 1)

    async def _gemini_attempt(self, request: GenerationRequest, deadline_at: float
                              ) -> AsyncGenerator[list[Chunk], None]:
        try:
            body = build_body(request, self._names)
        except RefusedField as exc:
            raise UpstreamError("invalid_request", f"{self.name}: {exc.field} cannot be sent to Gemini: {exc.message}",
                                status=400) from None
        model = quote(self.upstream_model_id(request.model), safe="-._")
        stream = GeminiStream(name=self.name, rename=self._names.from_provider)
        response = await self._open(f"{_API}/models/{model}:streamGenerateContent?alt=sse",
                                    msgspec.json.encode(body), deadline_at)
        body_reader = GeminiBody(stream)
        loop = asyncio.get_running_loop()
        untimed = untimed_margin(self.idle_timeout, direct=False)
        try:
            if response.status_code != 200:
                raise await self._status_failure(response)
            while not stream.done:
                try:
                    if deadline_at - loop.time() >= untimed:  # (a wait that needs no timer: generation_deadline)
                        raw = await response.read()
                    else:
                        async with asyncio.timeout_at(deadline_at):
                            raw = await response.read()
                except TimeoutError:
                    raise UpstreamError("upstream_timeout", f"{self.name}: generation deadline exceeded",
                                        before_first_token=not stream.streamed) from None
                except HTTPStreamError as exc:
                    raise self._stream_error(exc, before_first_token=not stream.streamed) from None
                if raw is None:
                    continue
                if not raw:
                    break
                batch = body_reader.feed(raw)
                if batch:
                    yield batch
                if stream.failure is not None:
                    raise stream.failure
            if not stream.done:
                batch = body_reader.finish()
                if batch:
                    yield batch
            if stream.failure is not None:
                raise stream.failure
        finally:
            await self._end_response(response, clean=stream.done and stream.failure is None)

    # -- failures ----------------------------------------------------------------------------------------------

    async def _status_failure(self, response: StreamResponse) -> UpstreamError:
        body = await response.read_all(_MAX_ERROR_BODY)
        return self._failure(response.status_code, body, response.headers.get("retry-after"))

    def _failure(self, status: int, body: bytes, retry_after: str | None, what: str = "") -> UpstreamError:
        kind = _error_status(body)
        detail = f"HTTP {status}" + (f" {kind}" if kind else "") + f": {error_message(body)}"
        if status in (401, 403):
            return UpstreamError("upstream_auth",
                                 f"{self.name}: {what}Gemini refused the API key ({detail}); set GEMINI_API_KEY or "
                                 "the upstream's api_key", status=status)
        if status == 429:
            wait = parse_retry_after(retry_after)
            return UpstreamError("rate_limited", f"{self.name}: {what}{detail}", status=status,
                                 retry_after=wait if wait is not None else _retry_delay(body))
        return UpstreamError("upstream_error", f"{self.name}: {what}{detail}", status=status,
                             retry_after=parse_retry_after(retry_after))


def _window(model: dict[str, Any]) -> int | None:
    """A model's context as the gateway's check counts it (prompt plus ``max_output_tokens``): Gemini's
    ``inputTokenLimit`` + ``outputTokenLimit``; ``None`` when either is missing."""
    given, output = model.get("inputTokenLimit"), model.get("outputTokenLimit")
    if isinstance(given, int) and isinstance(output, int) and given > 0 and output > 0 \
            and not isinstance(given, bool) and not isinstance(output, bool):
        return given + output
    return None


def _error_status(body: bytes) -> str | None:
    """Gemini's error ``status`` (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``...) when the body has one."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    status = error.get("status") if isinstance(error, dict) else None
    return status if isinstance(status, str) else None


def _retry_delay(body: bytes) -> float | None:
    """``RetryInfo.retryDelay`` (``"48s"``) of a Gemini error body, in seconds."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    for detail in (error.get("details") or () if isinstance(error, dict) else ()):
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None
