"""One response's work: route -> generate -> tools -> rewrite -> terminal, driving the writer.

How this works: the routing decision is made before streaming (an unknown pinned model must be a 400), so
:meth:`Pipeline.run` starts by announcing it (``response.routing.completed``, skipped for a pinned model). Each
*round* streams one upstream generation into the writer, flushing once per upstream chunk (one store append, one
reader wakeup). A round that ends in tool calls runs the server tools (announced, run, finished with output and
status) and loops back into the model, up to ``max_tool_rounds``; a client function tool ends the response with the
call in ``output``. *Ground first*: before the first round, one server tool picked by
:func:`~respstream.server.router.ground_first` from the input and the route runs and its result goes to the model as
a tool result (arithmetic -> ``calculator``, a time question -> ``current_datetime``, the ``retrieval`` route ->
``web_fetch`` for a URL or ``web_search``), so tools work even with a model too small to call them. A computed result
(calculator, current_datetime) also goes to the model as a system instruction to state it
(:func:`~respstream.server.grounded_answer.grounding_instruction`), and the final text is checked against it
(:class:`~respstream.server.grounded_answer.GroundedFacts`, after the rewriter; a correction shows as
``response.rewrite.in_progress``). An upstream with ``offer_server_tools = False`` (the embedded models) is offered
only the client's function tools, and none in a round that follows a tool result (such a model would repeat the call
instead of answering): one client tool round per turn. Only for a routed
(not pinned) request, a tool enabled for the request, fresh user input (not a ``function_call_output``
continuation), and once per response. The last
message goes through the rewriter before its ``output_text.done``.

Every way out ends the stream with exactly one terminal: ``UpstreamError`` -> its code (after failing over to
another upstream when nothing was shown yet), cancellation -> ``cancelled`` (or ``server_shutdown``), a server tool
that raises (instead of returning a failed result) -> its item done with ``status: failed``, then ``tool_error``;
anything else -> ``internal_error``. A tool that merely fails (status ``failed``) is reported on its item and the model
carries on. Closing the upstream generator (``aclosing``) frees its connection on every path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from respstream.server.grounded_answer import Fact, GroundedFacts, grounding_instruction
from respstream.server.item_relay import ItemRelay
from respstream.server.mcp_tools import McpToolbox, McpToolError
from respstream.server.requests import ResponseRequest
from respstream.server.router import ground_first
from respstream.server.store.base import SequenceConflict, StoreUnavailable
from respstream.server.structured_output import check_output
from respstream.server.telemetry.observation import current_attempt
from respstream.server.telemetry.response import NULL_TELEMETRY, ResponseTelemetry
from respstream.server.tools.search_query import search_query
from respstream.server.upstream.base import (
    Finish,
    GenerationRequest,
    PassedItemAdded,
    PassedItemDone,
    PassedItemEvent,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    Upstream,
    UpstreamError,
    Usage,
)
from respstream.server.upstream.chat_request import chat_options
from respstream.server.upstream.text_tool_calls import written_call
from respstream.server.writer import ResponseDeleted, ResponseWriter, WriterClosed

__all__ = ["Pipeline", "RewriterLike", "RouteDecisionLike", "RouterLike", "ToolCrashed", "ToolsLike"]

log = logging.getLogger("respstream.server")


class RouteDecisionLike(Protocol):
    model_id: str
    category: str
    source: str
    reasoning: str
    upstream: Upstream


class RouterLike(Protocol):
    async def route(self, input_text: str, pinned_model: str | None) -> Any: ...
    def models(self) -> list[str]: ...
    def fallback(self, decision: Any, error: BaseException) -> Any: ...
    def record_success(self, upstream: Upstream) -> None: ...
    def record_failure(self, upstream: Upstream, error: BaseException) -> None: ...


class ToolResultLike(Protocol):
    output: str
    status: str


class ToolsLike(Protocol):
    def specs(self) -> list[dict[str, Any]]: ...
    def names(self) -> set[str]: ...
    async def run(self, name: str, arguments_json: str) -> Any: ...


class RewriterLike(Protocol):
    async def rewrite(self, text: str, *, language: str | None) -> str: ...


class ToolCrashed(Exception):
    """A server tool raised instead of returning a failed result: the response ends with ``tool_error``."""


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Round:
    finish: Finish
    text: str
    calls: list[_Call]


class Pipeline:
    """Runs one response. ``cancel_code`` is what a cancellation of :meth:`run` reports. ``telemetry`` (set by
    the service) gets the first token, the upstream attempts, tool runs and the rewrite pass."""

    telemetry: ResponseTelemetry = NULL_TELEMETRY
    generation_started = 0.0  # time.perf_counter() when run() began (queue wait ends there)

    def __init__(
        self,
        *,
        writer: ResponseWriter,
        request: ResponseRequest,
        decision: Any,
        pinned: bool,
        messages: list[dict[str, Any]],
        router: RouterLike,
        tools: ToolsLike,
        rewriter: RewriterLike,
        max_tool_rounds: int = 4,
        on_tool: Any = None,
        mcp: McpToolbox | None = None,
    ) -> None:
        self.writer = writer
        self.request = request
        self.decision = decision
        # A pinned model is never announced (DESIGN §4), whoever decided it: the request or the router's own mark.
        self.pinned = pinned or "pinned" in (getattr(decision, "category", None), getattr(decision, "source", None))
        self.messages = messages
        self.router = router
        self.tools = tools
        self.rewriter = rewriter
        self.max_tool_rounds = max_tool_rounds
        self.cancel_code = "cancelled"
        self.cancel_message = "The response was cancelled."
        self.started = False
        self.cancel_requested = False
        self._usage = Usage()
        self._on_tool = on_tool
        self._facts: list[Fact] = []  # deterministic tool results the final text must state (grounded_answer.py)
        self._last_tool_status = ""
        server_names = tools.names()
        selected = request.server_tools
        policy = request.tool_policy
        self.server_tools = {n for n in (server_names if selected is None else server_names & selected)
                             if policy.permits(n)}
        self.client_tools = {t["name"]: t for t in request.client_tools if policy.permits(t["name"])}
        # max_tool_calls: every call the response makes (server tools, ground-first, client calls) counts.
        self.calls_left: int | None = request.options.max_tool_calls
        self._round_no = 0
        self.mcp = mcp  # the request's remote MCP servers (server/mcp_tools.py)

    # -- entry point -----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Produce the whole response; always ends with exactly one terminal event in the store."""
        w = self.writer
        self.started = True
        self.generation_started = time.perf_counter()
        try:
            try:
                if self.cancel_requested:
                    raise asyncio.CancelledError
                if not self.pinned:
                    d = self.decision
                    w.routing(model_id=d.model_id, category=d.category, source=d.source, reasoning=d.reasoning)
                await w.flush()
                if self.mcp is not None:
                    await self.mcp.start(w)
                    await self.mcp.run_approvals(w, self.messages)
                grounding = self._grounding()
                if grounding is not None:
                    await self._ground_first(*grounding)
                await self._generate_all()
            except asyncio.CancelledError:
                w.fail(self.cancel_code, self.cancel_message)
            except UpstreamError as exc:
                w.note_repairs(exc.repairs)
                w.fail(exc.code, exc.message)
            except (ToolCrashed, McpToolError) as exc:
                w.fail("tool_error", str(exc))
            except StoreUnavailable as exc:  # the log could not take our events; the terminal is retried later
                w.fail("store_unavailable", f"The response store failed while generating: {exc}")
            except (SequenceConflict, ResponseDeleted):
                # The log was ended behind our back (lease lost -> worker_lost) or deleted (perhaps from another
                # instance): there is nothing left to write to, so stop.
                w.abandon()
                return
            except WriterClosed:
                pass  # the writer ended the stream itself (rule violation)
            except Exception as exc:  # the stream must end with a terminal, whatever broke
                log.exception("response %s failed", w.record.id)
                w.fail("internal_error", f"internal error: {type(exc).__name__}")
            if not w.closed:
                w.fail("internal_error", "the pipeline ended without a terminal event")
            with self.telemetry.span("store finish", {"respstream.events": w.next_sequence_number}):
                await w.flush()
        except asyncio.CancelledError:
            # Cancelled while flushing the terminal: try once more so no reader hangs, then give up.
            if not w.closed:
                w.fail(self.cancel_code, self.cancel_message)
            await asyncio.shield(w.flush())
        finally:
            if self.mcp is not None:
                await self.mcp.aclose()

    # -- generation ------------------------------------------------------------------------------------------------
    async def _generate_all(self) -> None:
        w = self.writer
        for round_no in range(self.max_tool_rounds + 1):
            self._round_no = round_no
            offer_tools = (round_no < self.max_tool_rounds and self.request.tool_policy.mode != "none"
                           and self.calls_left != 0)
            result = await self._round_with_fallback(offer_tools)
            if result.finish.usage is not None:
                self._add_usage(result.finish.usage)
            if result.calls:
                if await self._handle_calls(result):
                    w.complete(usage=self._usage)
                    return
                continue
            text = w.open_message_text
            if result.finish.text is not None and text is not None:
                text = result.finish.text  # the upstream's own final text corrected its deltas (native Responses)
            # "repetition": the upstream's loop guard stopped an answer that kept repeating itself.
            incomplete = {"length": "max_output_tokens", "content_filter": "content_filter",
                          "repetition": "repetition"}.get(result.finish.reason)
            fmt = self.request.options.text_format
            if fmt.structured and not incomplete:
                # Structured output is checked, never rewritten: an answer that is not what the schema says must
                # not end as "completed".
                problem = await check_output(text or "", fmt)
                if problem is not None:
                    w.close_message(text, status="incomplete")
                    w.fail("invalid_structured_output", f"text.format {fmt.type}: {problem}")
                    return
                w.close_message(text)
            elif text is not None:
                final = text if fmt.structured else await self._rewrite(text)
                w.close_message(final, status="incomplete" if incomplete else "completed")
            w.complete(usage=self._usage, incomplete_reason=incomplete)
            return
        w.complete(usage=self._usage)  # rounds exhausted (unreachable: the last round offers no tools)

    async def _round_with_fallback(self, offer_tools: bool) -> _Round:
        while True:
            upstream: Upstream = self.decision.upstream
            start_seq = self.writer.next_sequence_number
            try:
                with self.telemetry.upstream_attempt(upstream, self.decision.model_id):
                    result = await self._round(upstream, offer_tools)
            except UpstreamError as exc:
                self.router.record_failure(upstream, exc)
                nothing_shown = self.writer.next_sequence_number == start_seq
                if not (exc.before_first_token and nothing_shown):
                    raise
                fallback = self.router.fallback(self.decision, exc)
                if fallback is None:
                    raise
                self.decision = fallback
                if not self.pinned:
                    self.writer.routing(model_id=fallback.model_id, category=fallback.category, source="fallback",
                                        reasoning=fallback.reasoning)
                    await self.writer.flush()
                continue
            self.router.record_success(upstream)
            return result

    async def _round(self, upstream: Upstream, offer_tools: bool) -> _Round:
        w = self.writer
        specs = self._tool_specs() if offer_tools else []
        if specs and not getattr(upstream, "offer_server_tools", True) and self.messages \
                and self.messages[-1].get("role") == "tool":
            # A small embedded model shown a tool result with the tools still offered writes the same call again
            # instead of answering: after a tool result it answers (one tool round per turn for these models).
            specs = []
        gen_request = GenerationRequest(
            model=self.decision.model_id,
            messages=self.messages,
            tools=specs,
            tool_choice=self._chat_tool_choice() if specs else None,
            max_output_tokens=self.request.max_output_tokens,
            temperature=self.request.temperature,
            options=chat_options(self.request, tools_offered=bool(specs)),
        )
        text: list[str] = []
        calls: dict[int, _Call] = {}
        finish = Finish("stop")
        relay = ItemRelay(w)  # a native Responses upstream's hosted-tool and reasoning items (item_relay.py)
        first = True
        stream: AsyncIterator[Any] = upstream.generate(gen_request)
        async with aclosing(stream):  # type: ignore[type-var]
            async for chunk in stream:
                kind = type(chunk)
                if first:
                    first = False
                    self._first_chunk(kind)
                if kind is TextDelta:
                    if chunk.text:
                        text.append(chunk.text)
                        w.text_delta(chunk.text, chunk.logprobs)
                elif kind is ReasoningDelta:
                    if chunk.text:
                        w.reasoning_delta(chunk.text)
                elif kind is RefusalDelta:
                    if chunk.text:
                        w.refusal_delta(chunk.text)
                elif kind is ToolCallDelta:
                    call = calls.get(chunk.index)
                    if call is None:
                        call = calls[chunk.index] = _Call(chunk.call_id or f"call_{w.record.id[-8:]}_{chunk.index}",
                                                          chunk.name or "")
                    call.arguments.append(chunk.arguments)
                elif kind is PassedItemEvent:
                    relay.event(chunk)
                elif kind is PassedItemAdded:
                    relay.added(chunk)
                elif kind is PassedItemDone:
                    relay.done(chunk)
                elif kind is Finish:
                    finish = chunk
                    w.note_repairs(chunk.repairs)
                    break
                if w.needs_flush_await:
                    await w.flush()  # stores without a synchronous append: one append per chunk
        return _Round(finish, "".join(text), [calls[i] for i in sorted(calls)] if offer_tools else [])

    def _first_chunk(self, kind: type) -> None:
        attempt = current_attempt()
        if attempt is not None:
            attempt.mark("first_chunk")
        if kind is not Finish:
            self.telemetry.first_token()

    # -- tools -----------------------------------------------------------------------------------------------------
    def _tool_specs(self) -> list[dict[str, Any]]:
        specs: list[dict[str, Any]] = []
        # An upstream may decline server tools (the embedded models: a small model offered web_search calls it for
        # every question, and the specs cost ~1,300 prompt tokens a round); grounding runs them for it instead.
        if getattr(self.decision.upstream, "offer_server_tools", True):
            specs = [s for s in self.tools.specs() if s.get("function", {}).get("name") in self.server_tools]
        for tool in self.client_tools.values():
            specs.append({"type": "function", "function": {
                "name": tool["name"], "description": tool.get("description") or "",
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}})
        if self.mcp is not None:
            specs.extend(self.mcp.specs())
        return specs

    def _chat_tool_choice(self) -> Any:
        """``tool_choice`` for the upstream. A forced or required choice holds for the first round only: once the
        model has called, the next round must be free to answer (else a forced tool would loop to the round limit)."""
        policy = self.request.tool_policy
        if self._round_no > 0 and policy.mode == "required":
            return "auto"
        return policy.chat_tool_choice()

    async def _handle_calls(self, result: _Round) -> bool:
        """Run server calls, emit client calls. True when the response ends here (a client call is pending)."""
        w = self.writer
        if not self.request.parallel_tool_calls:
            result.calls = result.calls[:1]  # parallel_tool_calls: false -> one call per turn, whatever the model did
        if self.calls_left is not None:
            result.calls = result.calls[: self.calls_left]  # calls past max_tool_calls are dropped, never run
            self.calls_left -= len(result.calls)
        if w.open_message_text is not None:
            text = w.open_message_text if result.finish.text is None else result.finish.text
            w.close_message(await self._rewrite(text))
        else:
            w.close_message()
        chat_calls = [{"id": c.call_id, "type": "function",
                       "function": {"name": c.name, "arguments": "".join(c.arguments) or "{}"}} for c in result.calls]
        self.messages.append({"role": "assistant", "content": result.text or None, "tool_calls": chat_calls})
        client_pending = False
        for call in result.calls:
            arguments = "".join(call.arguments)
            if call.name in self.client_tools:
                w.client_tool_call(call_id=call.call_id, name=call.name, arguments=arguments)
                client_pending = True
                continue
            if self.mcp is not None and call.name in self.mcp.by_tool:
                if self.mcp.needs_approval(call.name):
                    self.mcp.request_approval(w, call.name, arguments)
                    client_pending = True  # the response ends; the approval comes with the next request
                    continue
                output = await self.mcp.call(w, call.name, arguments)
                self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": output})
                continue
            output = await self._run_server_tool(call.call_id, call.name, arguments)
            self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": output})
        await w.flush()
        return client_pending

    async def _run_server_tool(self, call_id: str, name: str, arguments: str) -> str:
        w = self.writer
        index = w.server_tool_started(call_id=call_id, name=name, arguments=arguments, query=_query(arguments))
        await w.flush()
        crashed: Exception | None = None
        with self.telemetry.tool(name, call_id, arguments) as outcome:
            if name not in self.server_tools:
                output, status = f"unknown tool {name!r}", "failed"
            else:
                try:
                    result = await self.tools.run(name, arguments)
                    output, status = result.output, result.status
                except Exception as exc:  # tools report failures as results; an exception is a broken tool
                    log.exception("server tool %s raised", name)
                    crashed = exc
                    output, status = f"the {name} tool crashed ({type(exc).__name__})", "failed"
            outcome["status"] = status
        self._last_tool_status = status
        if self._on_tool is not None:
            self._on_tool(name, status)
        w.server_tool_finished(index, output=output, status=status, sources=_sources(output) if name == "web_search"
                               else None)
        await w.flush()
        if crashed is not None:
            raise ToolCrashed(output) from crashed
        return output

    def _fresh_user_turn(self) -> bool:
        """True when the request ends with new user input. A turn that carries tool results (a client's
        ``function_call_output`` continuation) already has what it needs: searching again would search for the
        tool's output. (Within one response the search runs once, before the first round, never per tool round.)"""
        last = self.request.input[-1] if self.request.input else None
        return last is not None and last.type == "message" and last.role == "user"

    def _grounding(self) -> tuple[str, dict[str, str]] | None:
        """The server tool to run before the first round and its arguments, or None (see the module docstring).
        A tool the request does not enable is skipped; the retrieval route then still searches when it may."""
        if self.pinned or not self._fresh_user_turn() or self.calls_left == 0:
            return None
        text = self.request.input_text
        category = str(getattr(self.decision, "category", ""))
        chosen = ground_first(text, category)
        if chosen is not None and chosen[0] in self.server_tools:
            return chosen
        if category == "retrieval" and "web_search" in self.server_tools:
            return "web_search", {"query": search_query(text)}
        return None

    async def _ground_first(self, name: str, arguments: dict[str, str]) -> None:
        """Run ``name`` as a server tool call (announced, run, finished like any other) and put its output in front
        of the model, so even a model that never calls tools answers from it.

        How the model gets it: a computed answer (``calculator``, ``current_datetime``) comes as the result of the
        model's own call, which small models repeat faithfully. Search and fetch results are context rather than the
        answer, and a request with client function tools must leave the model free to call them (a trailing tool
        result reads as "tools done, now answer"): those get a system note before the user's message instead."""
        call_id = f"call_{self.writer.record.id[-12:]}_{'search' if name == 'web_search' else 'ground'}"
        if self.calls_left is not None:
            self.calls_left -= 1
        arguments_json = json.dumps(arguments)
        output = await self._run_server_tool(call_id, name, arguments_json)
        if name in ("calculator", "current_datetime") and self._last_tool_status == "completed":
            # A computed answer: the model is told to state it (a system note before the question), and the final
            # text is checked against it (GroundedFacts, in _rewrite).
            fact = Fact(name, dict(arguments), output)
            self._facts.append(fact)
            self.messages.insert(len(self.messages) - 1 if self.messages else 0,
                                 {"role": "system", "content": grounding_instruction(fact)})
        offered = getattr(self.decision.upstream, "offer_server_tools", True)
        if name in ("calculator", "current_datetime") and not self.client_tools and offered:
            # A model that calls tools sees the result as its own call's (small models repeat it faithfully). One
            # that is not offered the gateway's tools gets only the note: shown a call, it writes calls as text.
            self.messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_json}}]})
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            return
        if name in ("calculator", "current_datetime") and self._facts:
            return  # the system note above already carries the result
        if name == "web_search":
            note = (f"Web search results for the user's question:\n{output}\n"
                    "Answer using these results and cite the URLs you use.")
        elif name == "web_fetch":
            note = f"The page {arguments.get('url', '')} reads:\n{output}\nAnswer using this page."
        else:
            note = f"The {name} tool ({arguments_json}) returned: {output}\nAnswer using this result."
        self.messages.insert(len(self.messages) - 1 if self.messages else 0, {"role": "system", "content": note})

    async def _rewrite(self, text: str) -> str:
        with self.telemetry.span("rewrite", {"respstream.rewrite.input_chars": len(text)}) as span:
            final = text
            try:
                final = await self.rewriter.rewrite(text, language=None)
            except Exception:  # a rewriter must never cost the answer
                log.exception("rewrite failed; keeping the streamed text")
                span.record_error(error_type="rewrite_failed")
            if written_call(final, self.tools.names() | set(self.client_tools)):
                # The model printed a call of a tool it was not offered (or after the tool rounds) instead of
                # answering: that is not an answer. With a grounded fact the next step states the result instead.
                final = ""
            if self._facts:
                # The last rewrite step: the answer must state what calculator / current_datetime computed.
                final = GroundedFacts(self._facts).apply(final)
            span.set_attribute("respstream.rewrite.changed", final != text)
            return final

    def _add_usage(self, usage: Usage) -> None:
        u = self._usage
        self._usage = Usage(
            input_tokens=u.input_tokens + usage.input_tokens,
            output_tokens=u.output_tokens + usage.output_tokens,
            reasoning_tokens=u.reasoning_tokens + usage.reasoning_tokens,
            cached_tokens=u.cached_tokens + usage.cached_tokens,
        )


def _query(arguments: str) -> str | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    query = value.get("query") if isinstance(value, dict) else None
    return query if isinstance(query, str) else None


def _sources(output: str) -> list[str]:
    try:
        value = json.loads(output)
    except ValueError:
        return []
    if isinstance(value, dict):
        value = value.get("results", [])
    if not isinstance(value, list):
        return []
    return [r["url"] for r in value if isinstance(r, dict) and isinstance(r.get("url"), str)]
