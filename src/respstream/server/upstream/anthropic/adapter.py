"""An Anthropic Messages API (``POST {base}/v1/messages``, ``stream: true``) as an :class:`Upstream`: the thin IO.

The request is mapped by :mod:`.request`, the stream read by :mod:`.body` and :mod:`.stream`; connections, the
concurrency limit, deadlines, the retrying generator and the model list (``GET /v1/models``, the same ``data[].id``
shape as OpenAI's) are the HTTP base's (:class:`~respstream.server.upstream.http.upstream.HttpUpstream`, which this
class extends, as every HTTP family does).
The key (``api_key`` option, else ``ANTHROPIC_API_KEY``) goes as ``x-api-key`` with ``anthropic-version``; it is
never logged or echoed (``repr`` leaves it out). Failures: 401/403 -> ``upstream_auth``; a prompt too long ->
``context_length_exceeded``; 429 (``retry-after`` up to ``max_retry_after`` seconds), 529 overloaded, 5xx and an
overloaded ``error`` event before any output -> retried ``retries`` times, then the router fails over to the route's
next upstream. With ``constrained=False`` (llama.cpp's ``/v1/messages``, which reads neither ``output_config`` nor a
forced ``tool_choice``: measured on loopback) ``text.format`` json_schema and a forced tool are refused with a 400
instead of being sent and dropped, unless ``forced_call_prefix`` says how the server's chat template opens a call:
then both are sent as a forced call after an assistant prefill (:mod:`.prefill`); with ``text_tool_calls`` too, a
call the model wrote as text under ``tool_choice`` auto becomes a real call (:mod:`.text_calls`). See
docs/gateway.md#anthropic.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import Any, Final

import msgspec

from respstream.server.upstream.anthropic.body import AnthropicBody
from respstream.server.upstream.anthropic.prefill import ANSWER_TOOL, drop_unread_none, force_by_prefill, prefilled_of
from respstream.server.upstream.anthropic.request import (
    DEFAULT_MAX_TOKENS,
    LEAST_THINKING_BUDGET,
    build_messages_body,
    tool_names,
)
from respstream.server.upstream.anthropic.stream import AnthropicStream
from respstream.server.upstream.anthropic.text_calls import written_calls_of
from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink, UpstreamError
from respstream.server.upstream.chat_wire import error_message
from respstream.server.upstream.generation_deadline import untimed_margin
from respstream.server.upstream.http.failures import status_failure
from respstream.server.upstream.http.stream import HTTPStreamError, StreamResponse
from respstream.server.upstream.http.upstream import HttpUpstream
from respstream.server.upstream.provider_tools import RefusedField, ToolNames, refused_as_http, tool_choice_of

__all__ = ["ANTHROPIC_VERSION", "AnthropicUpstream", "anthropic_base_url", "check_unconstrained"]

ANTHROPIC_VERSION: Final = "2023-06-01"
_RETRY_STATUSES: Final = frozenset({500, 502, 503, 504, 529})
_MAX_ERROR_BODY: Final = 64 * 1024


def anthropic_base_url(url: str) -> str:
    """``http://host:port`` (or with ``/v1``) -> the API root the paths hang from (``.../v1``)."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def check_unconstrained(request: GenerationRequest) -> None:
    """For a server that applies neither ``output_config.format`` nor a forced ``tool_choice`` (llama.cpp's
    ``/v1/messages`` drops both: its answer is free text either way), what would be silently dropped is refused.
    Raises :class:`RefusedField`."""
    fmt = request.options.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type", "text") != "text":
        raise RefusedField("text.format", "this server (llama.cpp's /v1/messages) ignores output_config.format, so "
                           "the answer would not follow the schema; use the embedded upstream kind, whose llama.cpp "
                           "Chat Completions endpoint turns the schema into a grammar")
    if request.tools and tool_choice_of(request.tool_choice).mode in ("required", "named"):
        raise RefusedField("tool_choice", "this server (llama.cpp's /v1/messages) does not force a tool call; use "
                           "auto (or none)")


class AnthropicUpstream(HttpUpstream):
    """Streams from ``{base_url}/messages`` (see the module docstring). Options: the HTTP base's (see
    :class:`HttpUpstream`), ``api_key`` (``x-api-key``), plus ``anthropic_version``, ``default_max_tokens``
    (``max_tokens`` when the request sets no ``max_output_tokens``), ``max_retry_after`` (the longest 429
    ``retry-after`` waited here) and ``sampling`` (forward ``temperature``/``top_p``: for servers that take them,
    such as llama.cpp's) and ``least_thinking_budget`` (the smallest ``budget_tokens``: the API's 1024; 1 for
    llama.cpp) and ``constrained`` (the server honours ``output_config.format`` and a forced ``tool_choice``; false
    for llama.cpp: see :func:`check_unconstrained`) and ``forced_call_prefix`` (with ``constrained=False``: the text
    the server's chat template opens a call with, sent as an assistant prefill to force one; see :mod:`.prefill`) and
    ``text_tool_calls`` (with ``constrained=False``: calls written as answer text become calls; see
    :mod:`.text_calls`)."""

    provider = "anthropic"
    OWN_OPTIONS: Final = frozenset({"anthropic_version", "default_max_tokens", "max_retry_after", "sampling",
                                    "least_thinking_budget", "constrained", "forced_call_prefix",
                                    "text_tool_calls"})
    input_modalities = ("text", "image", "file")
    takes_read_sink = False
    # Claude's text is passed as written: the rewriter's clean-up steps for small local models (leaked markup,
    # whitespace) are skipped; opt-in model steps (language alignment, spelling) still run.
    exact_text = True
    models_path = "/models?limit=1000"  # (the API pages its list, 20 by default; 1000 is its largest page)

    def __init__(self, base_url: str, *, name: str, api_key: str | None = None,
                 anthropic_version: str = ANTHROPIC_VERSION, default_max_tokens: int = DEFAULT_MAX_TOKENS,
                 max_retry_after: float = 10.0, sampling: bool = False,
                 least_thinking_budget: int = LEAST_THINKING_BUDGET, constrained: bool = True,
                 forced_call_prefix: str | None = None, text_tool_calls: bool = False, **options: Any) -> None:
        super().__init__(anthropic_base_url(base_url), name=name, **options)
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        self._headers["anthropic-version"] = anthropic_version
        if key:
            self._headers["x-api-key"] = key
        self.default_max_tokens = default_max_tokens
        self.max_retry_after = max_retry_after
        self.sampling = sampling
        self.least_thinking_budget = least_thinking_budget
        self.constrained = constrained
        self.forced_call_prefix = forced_call_prefix if not constrained else None
        # (a server with native tool_use, Claude, writes no calls as text: its text is never read for one)
        self.text_tool_calls = text_tool_calls and not constrained

    def __repr__(self) -> str:
        return f"AnthropicUpstream({self.base_url!r}, name={self.name!r})"

    async def count_tokens(self, messages: list[dict[str, Any]], extra_text: str = "") -> int | None:
        """Prompt tokens from llama.cpp's tokenizer on ``anthropic+embedded`` (``constrained=False``); None (the
        caller estimates) for any other Anthropic server: its host has no ``/apply-template``, and the prompt must
        not go to a path of it that is not the API's."""
        if self.constrained:
            return None
        return await super().count_tokens(messages, extra_text)

    # -- requests --------------------------------------------------------------------------------------------------

    def body(self, request: GenerationRequest, names: ToolNames | None = None) -> dict[str, Any]:
        """The ``POST /v1/messages`` body (``names``: the request's tool names, to restore them in its stream).
        Raises :class:`RefusedField`."""
        if not self.constrained and self.forced_call_prefix is None:
            check_unconstrained(request)
        body = build_messages_body(request, model=self.upstream_model_id(request.model),
                                   names=names if names is not None else tool_names(),
                                   default_max_tokens=self.default_max_tokens, sampling=self.sampling,
                                   least_thinking_budget=self.least_thinking_budget)
        if self.forced_call_prefix is not None:
            force_by_prefill(body, self.forced_call_prefix)
        elif not self.constrained:
            drop_unread_none(body)
        return body

    def check_request(self, request: GenerationRequest) -> None:
        """Before streaming: a field Anthropic cannot take is a 400 naming it. Raises :class:`HTTPError`."""
        try:
            self.body(request)
        except RefusedField as exc:
            raise refused_as_http(exc, f"Anthropic upstream {self.name}") from None

    # -- generation ------------------------------------------------------------------------------------------------

    def generate_batches(self, request: GenerationRequest, sink: ReadSink | None = None
                         ) -> AsyncGenerator[list[Chunk], None]:
        """Chunks ending with one ``Finish``, one list per read. Raises :class:`UpstreamError`."""
        return self._with_retries(request, self._messages_attempt)

    def _retryable(self, exc: UpstreamError) -> bool:
        if not exc.before_first_token:
            return False
        if exc.status == 429:
            return exc.retry_after is not None and exc.retry_after <= self.max_retry_after
        if exc.status in _RETRY_STATUSES:
            return True
        return exc.status is None and super()._retryable(exc)

    async def _messages_attempt(self, request: GenerationRequest, deadline_at: float
                                ) -> AsyncGenerator[list[Chunk], None]:
        names = tool_names()  # (per request: what the provider calls is restored from this request's tools)
        try:
            fields = self.body(request, names)
        except RefusedField as exc:
            raise UpstreamError("unsupported_parameter", f"{self.name}: {exc}", status=400) from None
        plan = prefilled_of(fields, self.forced_call_prefix)
        deadline = self._deadline(deadline_at)
        response = await self._open("/messages", msgspec.json.encode(fields), deadline.at)
        stream = AnthropicStream(name=self.name, names=names, single_call=plan.single_call,
                                 answer_tool=plan.answer_tool)
        # (a forced call comes as tool_use after the prefill: only an unforced turn's text may hold a written call)
        written = written_calls_of(fields, request, names, skip=frozenset({ANSWER_TOOL})) \
            if self.text_tool_calls and not plan.single_call else None
        reader = AnthropicBody(stream)
        try:
            if response.status_code != 200:
                raise await self._status_error(response)
            loop = asyncio.get_running_loop()
            untimed = untimed_margin(self.idle_timeout, direct=False)
            while not stream.done and stream.failure is None:
                try:
                    if deadline.at - loop.time() >= untimed:  # (the idle timer ends a read first: no timer needed)
                        raw = await response.read()
                    else:
                        async with asyncio.timeout_at(deadline.at):
                            raw = await response.read()
                except TimeoutError:
                    raise UpstreamError("upstream_timeout", f"{self.name}: generation deadline exceeded",
                                        before_first_token=not stream.streamed) from None
                except HTTPStreamError as exc:
                    raise self._stream_error(exc, before_first_token=not stream.streamed) from None
                batch = reader.feed(raw) if raw else reader.end()
                if written is not None and batch:
                    batch = written.read(batch)
                if batch:
                    if deadline.waiting:
                        deadline.first_out()
                    yield batch
                if not raw:
                    break
            if stream.failure is not None:
                raise stream.failure
        finally:
            # (a stream ended after its first call is still being written: its connection is closed, which also
            # stops llama.cpp generating)
            await self._end_response(response, clean=stream.done and stream.failure is None and not stream.cut)

    async def _status_error(self, response: StreamResponse) -> UpstreamError:
        if response.status_code not in (400, 401, 403):
            return await status_failure(self.name, response)
        raw = await response.read_all(_MAX_ERROR_BODY)
        status = response.status_code
        message = error_message(raw)
        if status in (401, 403):
            return UpstreamError("upstream_auth", f"{self.name}: the upstream refused our credentials (HTTP {status}: "
                                 f"{message}); check its api_key or ANTHROPIC_API_KEY", status=status)
        code = "context_length_exceeded" if "prompt is too long" in message else "upstream_invalid_request"
        return UpstreamError(code, f"{self.name}: HTTP 400 invalid_request_error: {message}", status=status)

