"""An upstream that speaks the Responses API itself (llama.cpp, vLLM, Ollama, LM Studio, OpenAI...) as an
:class:`Upstream`: the gateway in front of it is a *repair proxy*.

How this works: ``generate()`` posts the generation to ``{base_url}/responses`` with ``stream: true`` and
``store: false`` (the gateway keeps the history: ``previous_response_id`` and conversations were already expanded
into input items by the pipeline, so the upstream need not store anything), then reads the answer through
:class:`~respstream.server.upstream.responses.stream.ResponsesTranslator`, i.e. the protocol core. The chunks go to
the same pipeline and writer as a Chat Completions upstream's, so routing, server tools, rewrite, background,
durable resume on any instance, cancel and conversations work on top unchanged, and the stream the client gets has
our sequence numbers, indices and lifecycle whatever the upstream sent. What was repaired is counted per violation
code (``Finish.repairs``, ``UpstreamError.repairs``) for the response's record, ``GET`` and ``/metrics``.

Everything about connections, limits, timeouts, retries and error codes is the HTTP base's
(:class:`~respstream.server.upstream.http.upstream.HttpUpstream`, which this class extends), as for every HTTP
family: one keep-alive pool, ``max_concurrency`` slots with a bounded queue, ``idle_timeout``, ``deadline``,
``retries`` before the first token, 429 -> ``rate_limited`` with ``Retry-After``.

``api``: ``"responses"`` (a ``responses+http(s)://`` spec), or ``"auto"`` (a plain ``http(s)://`` spec): ``start()``
probes which API the upstream offers with one ``POST {base_url}/responses`` whose body is ``{}`` (bounded by
``probe_timeout``, same client, headers and API key as generation): a server with the Responses API refuses it
(400/422: ``input`` is required), one without it answers 404/405/501, and is then used through Chat Completions.
Any other answer (401, 5xx, no connection) leaves it undecided: that generation goes through Chat Completions, and the
next one probes again. ``api_mode`` says what was decided. Chat Completions is spoken through the chat family's
:class:`~respstream.server.upstream.chat.adapter.ChatCompletionsAPI` over this upstream's own pool, slot and retries.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, Final

import msgspec

from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink, UpstreamError
from respstream.server.upstream.cache_hints import CACHE_BREAKPOINT_KEY, marked_content
from respstream.server.upstream.chat.adapter import ChatCompletionsAPI, bearer_headers
from respstream.server.upstream.generation_deadline import untimed_margin
from respstream.server.upstream.http.stream import HTTPStreamError
from respstream.server.upstream.http.upstream import HttpUpstream
from respstream.server.upstream.responses.reads import ResponsesBodyReader
from respstream.server.upstream.responses.stream import ResponsesTranslator

__all__ = ["ResponsesNativeUpstream", "build_responses_body"]

log = logging.getLogger("respstream.server")

_RETRYABLE: Final = {"upstream_unavailable", "upstream_error", "upstream_timeout"}
_NO_RESPONSES_API: Final = {404, 405, 501}
_HAS_RESPONSES_API: Final = {200, 400, 422}
API_MODES: Final = ("responses", "auto")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def build_responses_body(request: GenerationRequest, *, model: str | None = None,
                         cache_fields: bool = True) -> dict[str, Any]:
    """The JSON body for a streaming ``POST /responses`` from the pipeline's Chat-style request.

    Messages become input items (system/user/assistant messages with string content, ``function_call`` and
    ``function_call_output`` items); Chat ``tools`` become Responses function tools; ``max_tokens`` is
    ``max_output_tokens``. ``store: false``: the gateway owns the history. ``cache_fields``: the client's
    ``prompt_cache_key``, ``prompt_cache_options`` / ``prompt_cache_retention`` (as given: OpenAI's Responses API
    takes both) and its breakpoints (``prompt_cache_breakpoint`` on the marked message's ``input_text`` part).
    """
    items: list[dict[str, Any]] = []
    for message in request.messages:
        role = message.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": str(message.get("tool_call_id") or ""),
                          "output": _text(message.get("content"))})
            continue
        text = _text(message.get("content"))
        if text or not message.get("tool_calls"):
            mark = message.get(CACHE_BREAKPOINT_KEY) if cache_fields else None
            items.append({"type": "message", "role": role if role in ("system", "assistant") else "user",
                          "content": text if mark is None else marked_content(text, mark, "input_text")})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            items.append({"type": "function_call", "call_id": str(call.get("id") or ""),
                          "name": str(function.get("name") or ""), "arguments": str(function.get("arguments") or "{}")})
    body: dict[str, Any] = {"model": model or request.model, "input": items, "stream": True, "store": False}
    if request.tools:
        body["tools"] = [_responses_tool(t) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _responses_tool_choice(request.tool_choice)
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    key = request.options.get("prompt_cache_key")
    if cache_fields and key:
        body["prompt_cache_key"] = key
    if cache_fields:
        body.update(request.cache.wire)
    return body


def _responses_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, dict):
        return tool
    out: dict[str, Any] = {"type": "function", "name": function.get("name", "")}
    for key in ("description", "parameters", "strict"):
        if key in function:
            out[key] = function[key]
    return out


def _responses_tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


class ResponsesNativeUpstream(HttpUpstream):
    """Streams from ``{base_url}/responses`` (see the module docstring). Options: the HTTP base's (see
    :class:`HttpUpstream`), ``api_key`` (``authorization: Bearer``), ``api`` (``responses`` | ``auto``),
    ``probe_timeout`` (seconds, for ``auto``), and for Chat Completions (``auto`` without a Responses API)
    :class:`ChatCompletionsAPI`'s ``include_usage``, ``extra_body``, ``loop_guard`` and ``text_tool_calls``."""

    takes_read_sink = True  # (either API reads plain text into the sink: responses/reads.py, chat/reads.py)

    def __init__(self, base_url: str, *, name: str, api: str = "responses", probe_timeout: float = 5.0,
                 api_key: str | None = None, headers: dict[str, str] | None = None, include_usage: bool = True,
                 extra_body: dict[str, Any] | None = None, loop_guard: bool = False, text_tool_calls: bool = False,
                 **transport: Any) -> None:
        if api not in API_MODES:
            raise ValueError(f"api must be one of {', '.join(API_MODES)}, not {api!r}")
        super().__init__(base_url, name=name, headers=bearer_headers(api_key, headers), **transport)
        self.api_key = api_key
        self.chat_api = ChatCompletionsAPI(include_usage=include_usage, extra_body=extra_body,
                                           loop_guard=loop_guard, text_tool_calls=text_tool_calls)
        self.api_mode = api  # "responses" | "chat" (decided by the probe) | "auto" (not decided yet)
        self.probe_timeout = probe_timeout

    def __repr__(self) -> str:
        return f"ResponsesNativeUpstream({self.base_url!r}, name={self.name!r}, api={self.api_mode!r})"

    async def start(self) -> None:
        await super().start()
        if self.api_mode == "auto":
            await self.detect_api()

    async def detect_api(self) -> str:
        """Decide ``api_mode`` for an ``auto`` upstream with one bounded request; returns the mode. Never raises.
        (Not named ``probe``: that is the health check's hook, which must raise when the upstream is down.)"""
        if self.api_mode != "auto":
            return self.api_mode
        status: int | None = None
        try:
            async with asyncio.timeout(self.probe_timeout):
                response = await self._lean().post(f"{self.base_url}/responses", b"{}",
                                                   {**self._headers, "accept": "application/json"})
                status = response.status_code
                await response.aclose()
        except (TimeoutError, HTTPStreamError) as exc:
            log.info("upstream %s: API probe failed (%s); using Chat Completions for now", self.name, exc)
            return "auto"
        if status in _HAS_RESPONSES_API:
            self.api_mode = "responses"
        elif status in _NO_RESPONSES_API:
            self.api_mode = "chat"
        log.info("upstream %s: POST /responses probe answered HTTP %s -> %s", self.name, status, self.api_mode)
        return self.api_mode

    def generate_batches(self, request: GenerationRequest, sink: ReadSink | None = None
                         ) -> AsyncGenerator[list[Chunk], None]:
        """Chunks ending with one ``Finish``, one list per read of the body (``generate()`` yields them one by one).
        Raises :class:`UpstreamError` (codes as Chat Completions). Once the API is decided, the API's own retrying
        generator (no layer around it). With ``sink``, reads of plain text may go to it from the connection's data
        callback instead, in either API (responses/reads.py, chat/reads.py)."""
        return self._detected_batches(request, sink) if self.api_mode == "auto" \
            else self._batches_as_decided(request, sink)

    def _batches_as_decided(self, request: GenerationRequest, sink: ReadSink | None
                            ) -> AsyncGenerator[list[Chunk], None]:
        """The Responses API's retrying generator when the probe said so, else Chat Completions' (also while the
        API is still undecided: a failed probe)."""
        if self.api_mode == "responses":
            return self._with_retries(request, functools.partial(self._responses_attempt, sink=sink))
        return self.chat_api.batches(self, request, sink)

    async def _detected_batches(self, request: GenerationRequest, sink: ReadSink | None
                                ) -> AsyncGenerator[list[Chunk], None]:
        await self.detect_api()  # ("auto" again when the probe failed: Chat Completions this time, probe next time)
        batches = self._batches_as_decided(request, sink)
        async with aclosing(batches):
            async for batch in batches:
                yield batch

    def _responses_attempt(self, request: GenerationRequest, deadline_at: float, sink: ReadSink | None = None
                           ) -> AsyncIterator[list[Chunk]]:
        return self._native_attempt(request, ResponsesTranslator(name=self.name), deadline_at, sink)

    def _retryable(self, exc: UpstreamError) -> bool:
        if self.api_mode != "responses":
            return super()._retryable(exc)
        # Only an HTTP failure: a failed *response* is the model's answer, not the upstream's fault.
        return exc.before_first_token and exc.code in _RETRYABLE and exc.status is not None and exc.status >= 500

    async def _native_attempt(
        self, request: GenerationRequest, translator: ResponsesTranslator, deadline_at: float,
        sink: ReadSink | None = None,
    ) -> AsyncGenerator[list[Chunk], None]:
        """One request; one list of chunks per read of the body, the reads of plain text to ``sink`` when there is
        one (taken from the socket's callback while this waits: reads.py)."""
        loop = asyncio.get_running_loop()
        body = msgspec.json.encode(build_responses_body(request, model=self.upstream_model_id(request.model),
                                                        cache_fields=self.forward_cache_fields))
        deadline = self._deadline(deadline_at)
        response = await self._open("/responses", body, deadline.at)
        reader = ResponsesBodyReader(translator, sink) if sink is not None else None
        next_read = response.read if reader is None else functools.partial(
            response.read_direct, deadline.watch(reader.take, lambda: translator.streamed))
        try:
            if response.status_code != 200:
                raise await self._status_error(response)
            untimed = untimed_margin(self.idle_timeout, direct=reader is not None)
            while not translator.done or (reader is not None and reader.pending is not None):
                if reader is not None and reader.pending is not None:  # a read the direct hook took and left for us
                    batch, failure = reader.pending
                    reader.pending = None
                    if batch:
                        if deadline.waiting:
                            deadline.first_out()
                        yield batch
                    if failure is not None:
                        raise failure
                    continue
                try:
                    if deadline.at - loop.time() >= untimed:  # (when a wait needs no timer: generation_deadline)
                        raw = await next_read()
                    else:
                        async with asyncio.timeout_at(deadline.at):
                            raw = await next_read()
                except TimeoutError:
                    raise self._tagged(translator, UpstreamError(
                        "upstream_timeout", f"{self.name}: generation deadline exceeded",
                        before_first_token=not translator.streamed)) from None
                except HTTPStreamError as exc:
                    error = self._stream_error(exc, before_first_token=not translator.streamed)
                    raise self._tagged(translator, error) from None
                if raw is None:
                    continue  # (the hook kept it: pending)
                if not raw:
                    break
                batch = translator.feed(raw)
                if batch:
                    if deadline.waiting:
                        deadline.first_out()
                    yield batch
                if translator.failure is not None:
                    raise translator.failure
            batch = translator.finish()
            if batch:
                yield batch
            if translator.failure is not None:
                raise translator.failure
        finally:
            await self._end_response(response, clean=translator.done and translator.failure is None)

    @staticmethod
    def _tagged(translator: ResponsesTranslator, error: UpstreamError) -> UpstreamError:
        error.repairs = translator.repair_counts()
        return error
