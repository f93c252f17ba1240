"""One response's work: route -> generate -> tools -> rewrite -> terminal, driving the writer.

How this works: the routing decision is made before streaming (an unknown pinned model must be a 400), so
:meth:`Pipeline.run` starts by announcing it (``response.routing.completed``, skipped for a pinned model). Each
*round* streams one upstream generation into the writer (:mod:`~respstream.server.responses.round_collector`), a batch
per upstream read when the upstream offers ``generate_batches``; on a store without a synchronous append the writer
group-commits (a write in flight, the events that come meanwhile queued for the next: ``flush_behind``). A round
that ends in tool calls runs the server tools (announced, run, finished with output and status) and loops back into
the model, up to ``max_tool_rounds``; a client function tool ends the response with the
call in ``output`` (:mod:`~respstream.server.responses.tool_rounds`). *Ground first*: before the first round, one server
tool picked from the input and the route may run and its result goes to the model
(:mod:`~respstream.server.responses.ground_first_step`); a computed result is checked against the final text
(:class:`~respstream.server.responses.grounded_answer.GroundedFacts`, after the rewriter; a correction shows as
``response.rewrite.in_progress``). An upstream with ``offer_server_tools = False`` (the embedded models) is offered
only the client's function tools, and none in a round that follows a tool result (such a model would repeat the call
instead of answering): one client tool round per turn. The last
message goes through the rewriter before its ``output_text.done``. Search results are numbered for the model (``[1]``
...), and where the final text cites one (by URL, title or marker) its ``output_text`` part gets a ``url_citation``
annotation (:mod:`~respstream.server.responses.citations`, computed on the text after the rewrite). For an upstream with
``list_sources`` (the embedded models) a final answer that cites none of them gets a ``Sources:`` line naming them.

Every way out ends the stream with exactly one terminal: ``UpstreamError`` -> its code (after failing over to
another upstream when nothing was shown yet), cancellation -> ``cancelled`` (or ``server_shutdown``), a server tool
that raises (instead of returning a failed result) -> its item done with ``status: failed``, then ``tool_error``;
anything else -> ``internal_error``. A tool that merely fails (status ``failed``) is reported on its item and the model
carries on. Closing the upstream generator (``aclosing``) frees its connection on every path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from respstream.server.events.progress_events import start_progress_events
from respstream.server.events.writer import ResponseDeleted, ResponseWriter, WriterClosed
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.inputs.structured_output import check_output
from respstream.server.responses.chat_request import cache_hints, chat_options
from respstream.server.responses.citations import CitationSources, Source, find_citations, with_source_list
from respstream.server.responses.collaborators import RewriterLike, RouteDecisionLike, RouterLike, ToolsLike
from respstream.server.responses.ground_first_step import GroundFirst
from respstream.server.responses.grounded_answer import Fact, GroundedFacts
from respstream.server.responses.round_collector import RoundCollector
from respstream.server.responses.tool_rounds import RoundResult, ToolCrashed, ToolRounds
from respstream.server.responses.turn_control import STEERED, TurnControl
from respstream.server.routing.classify import RoutingRules, asks_for_length
from respstream.server.store.base import SequenceConflict, SequenceGap, StoreUnavailable
from respstream.server.telemetry.observation import current_attempt
from respstream.server.telemetry.response import NULL_TELEMETRY, ResponseTelemetry
from respstream.server.tools.mcp_tools import McpToolbox, McpToolError
from respstream.server.upstream.base import (
    Finish,
    GenerationRequest,
    Upstream,
    UpstreamError,
    Usage,
)
from respstream.server.upstream.text_tool_calls import written_call

__all__ = ["Pipeline", "RewriterLike", "RouteDecisionLike", "RouterLike", "ToolCrashed", "ToolsLike"]

log = logging.getLogger("respstream.server")


class Pipeline(GroundFirst, ToolRounds, TurnControl):
    """Runs one response. ``cancel_code`` is what a cancellation of :meth:`run` reports. ``telemetry`` (set by
    the service) gets the first token, the upstream attempts, tool runs and the rewrite pass."""

    telemetry: ResponseTelemetry = NULL_TELEMETRY
    generation_started = 0.0  # time.perf_counter() when run() began (queue wait ends there)
    progress_seconds = 0.0  # a quiet response gets a `keepalive` event this often (server/events/progress_events.py)

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
        max_citations: int = 64,
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
        # Set by whoever cancels this response (ResponseService.cancel_running: a cancel request, a client gone, a
        # shutdown). A cancellation without it came from inside (a library's cancel scope leaking into this task):
        # that is a failure to report, never a "cancelled" nobody asked for (issue 42, X2).
        self.cancel_requested = False
        self._hosted_running = 0  # hosted (server) tool work running now: a steer waits for it
        self._steer_after_work = False
        self._usage = Usage()
        self._on_tool = on_tool
        self._facts: list[Fact] = []  # deterministic tool results the final text must state (grounded_answer.py)
        self._last_tool_status = ""
        # web_search results, numbered for [n] markers; the final answer's url_citation annotations point at them.
        self._sources = CitationSources()
        self._last_results: list[Source] = []
        self.max_citations = max_citations
        server_names = tools.names()
        selected = request.server_tools
        policy = request.tool_policy
        self.server_tools = {n for n in (server_names if selected is None else server_names & selected)
                             if policy.permits(n)}
        self.client_tools = {t["name"]: t for t in request.client_tools if policy.permits(t["name"])}
        # max_tool_calls: every call the response makes (server tools, ground-first, client calls) counts.
        self.calls_left: int | None = request.options.max_tool_calls
        self._round_no = 0
        self.round_output_from = 0
        self.mcp = mcp  # the request's remote MCP servers (server/tools/mcp_tools.py)
        # Runs after response.created, before anything is generated (the context compaction step).
        self.prelude: Callable[[Pipeline], Awaitable[None]] | None = None
        self.compaction_item: dict[str, Any] | None = None  # the compaction item emitted, if any
        self.compaction_tail = 0  # how many of the request's last input items follow the compaction

    # -- entry point -----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Produce the whole response; always ends with exactly one terminal event in the store."""
        w = self.writer
        self.started = True
        self.generation_started = time.perf_counter()
        progress = start_progress_events(w, self.progress_seconds)
        try:
            try:
                if self.cancel_requested:
                    raise asyncio.CancelledError
                if not self.request.generate:
                    self._prewarm()
                else:
                    await self._announce_and_generate()
            except asyncio.CancelledError:
                if self.cancel_code == STEERED:  # a clean boundary: open items closed, what was streamed kept
                    w.complete(usage=self._usage, incomplete_reason=STEERED)
                elif self.cancel_requested:
                    w.fail(self.cancel_code, self.cancel_message)
                else:
                    log.error("response %s: cancelled from inside, though nobody asked for it", w.record.id)
                    w.fail("internal_error", "The response was interrupted by a cancellation nobody asked for "
                                             "(a tool or upstream library cancelled it).")
            except UpstreamError as exc:
                w.note_repairs(exc.repairs)
                w.fail(exc.code, exc.message)
            except (ToolCrashed, McpToolError) as exc:
                w.fail("tool_error", str(exc))
            except StoreUnavailable as exc:  # the log could not take our events; the terminal is retried later
                w.fail("store_unavailable", f"The response store failed while generating: {exc}")
            except SequenceGap:
                # The store lost events it had acknowledged and cannot take more: the service ends the log right
                # after what it really holds (a terminal from here would be refused the same way).
                w.abandon()
                raise
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
            if progress is not None:
                progress.cancel()
            if self.mcp is not None:
                await self.mcp.aclose()

    async def _announce_and_generate(self) -> None:
        w = self.writer
        if not self.pinned:
            d = self.decision
            w.routing(model_id=d.model_id, category=d.category, source=d.source, reasoning=d.reasoning)
        await w.flush()
        if self.prelude is not None:  # context compaction (compaction_step.py): may end the response
            await self.prelude(self)
            if w.closed:
                return
        if self.mcp is not None:
            with self._hosted_work():  # (remote MCP servers: listed, approved calls run)
                await self.mcp.start(w)
                await self.mcp.run_approvals(w, self.messages)
            self._stop_if_steered()
        grounding = self._grounding()
        if grounding is not None:
            with self._hosted_work():
                await self._ground_first(*grounding)
            self._stop_if_steered()
        await self._generate_all()

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
                with self._hosted_work():
                    ended = await self._handle_calls(result)
                if ended:
                    w.complete(usage=self._usage)
                    return
                self._stop_if_steered()
                continue
            if round_no == 0 and self._forced_call_from_text(result):  # server/responses/forced_call.py
                return
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
                if not fmt.structured and not incomplete:
                    final = self._list_sources(final)
                w.close_message(final, status="incomplete" if incomplete else "completed",
                                annotations=None if fmt.structured else self._citations(final))
            w.complete(usage=self._usage, incomplete_reason=incomplete)
            return
        w.complete(usage=self._usage)  # rounds exhausted (unreachable: the last round offers no tools)

    async def _round_with_fallback(self, offer_tools: bool) -> RoundResult:
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

    def _output_cap(self, upstream: Upstream) -> int | None:
        """The request's ``max_output_tokens``; else, on the ``fast`` route of an upstream that caps answers by
        default (the embedded model), the shorter cap of a chat turn (``router.rules.fast_max_output_tokens``),
        unless the input asks for a long answer ("tell me a long story")."""
        default = getattr(upstream, "max_output_tokens", None)
        if self.request.max_output_tokens is not None or default is None or self.pinned \
                or getattr(self.decision, "category", None) != "fast" or asks_for_length(self.request.input_text):
            return self.request.max_output_tokens
        rules = getattr(self.router, "rules", None) or RoutingRules()
        return min(int(default), rules.fast_max_output_tokens)

    async def _round(self, upstream: Upstream, offer_tools: bool) -> RoundResult:
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
            max_output_tokens=self._output_cap(upstream),
            temperature=self.request.temperature,
            options=chat_options(self.request, tools_offered=bool(specs)),
            cache=cache_hints(self.request),
        )
        self.round_output_from = len(w.response.get("output", []))  # (this round's items: tool_rounds.py)
        collector = RoundCollector(w, self._first_chunk)
        # A store without a synchronous append (SQLite, Redis) gets group commit: a write starts as soon as there is
        # something to write, and what comes while it runs goes in the next one. The memory store batches by itself
        # (one append per event-loop turn).
        group = w.needs_flush_await
        try:
            batches = getattr(upstream, "generate_batches", None)
            if batches is not None:
                # Everything one upstream read held at once, as one batch: one generator hop instead of one per
                # chunk. Only what is already here: nothing waits for more.
                # On the memory store, reads of plain text go straight to the collector from the upstream's data
                # callback (this task is not woken for them): a real model's stream is one read per token.
                batch_stream: AsyncIterator[list[Any]] = (
                    batches(gen_request, sink=collector.take_read)
                    if not group and getattr(upstream, "takes_read_sink", False) else batches(gen_request))
                async with aclosing(batch_stream):  # type: ignore[type-var]
                    async for batch in batch_stream:
                        finished = collector.take_all(batch)
                        if group:
                            await w.flush_behind()
                        if finished:
                            break
            else:
                stream: AsyncIterator[Any] = upstream.generate(gen_request)
                take = collector.take
                async with aclosing(stream):  # type: ignore[type-var]
                    async for chunk in stream:
                        if take(chunk):
                            break
                        if group:
                            await w.flush_behind()
        except Exception:  # (a cancellation passes: the terminal's flush waits for the write in flight)
            if group:
                await w.settle()  # a write that failed meanwhile (the log was taken from us) says so first
            raise
        if group:
            await w.flush()  # the round's events are all in the store before tools, rewrite or the terminal
        return collector.result(offer_tools)

    def _first_chunk(self, kind: type) -> None:
        attempt = current_attempt()
        if attempt is not None:
            attempt.mark("first_chunk")
        if kind is not Finish:
            self.telemetry.first_token()

    async def _rewrite(self, text: str) -> str:
        with self.telemetry.span("rewrite", {"respstream.rewrite.input_chars": len(text)}) as span:
            final = text
            try:
                rewriter = self.rewriter
                if getattr(self.decision.upstream, "exact_text", False):  # (a provider's answer, as written)
                    rewriter = getattr(rewriter, "model_steps", rewriter)
                final = await rewriter.rewrite(text, language=None)
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

    def _list_sources(self, text: str) -> str:
        """A model too small to cite (``list_sources`` on its upstream: the embedded ones) gets the results it was
        given named in a ``Sources:`` line when its answer cites none; shown as a rewrite, annotated as citations."""
        if not self._sources or self.max_citations == 0 or not getattr(self.decision.upstream, "list_sources", False):
            return text
        return with_source_list(text, self._sources, limit=min(10, self.max_citations))

    def _citations(self, text: str) -> list[dict[str, Any]]:
        """The url_citation annotations of a final answer: where it cites this response's search results."""
        return find_citations(text, self._sources, limit=self.max_citations)

    def add_usage(self, usage: Usage) -> None:
        """Count ``usage`` (work done for this response outside its model rounds) in the response's usage."""
        self._add_usage(usage)

    def _add_usage(self, usage: Usage) -> None:
        u = self._usage
        self._usage = Usage(
            input_tokens=u.input_tokens + usage.input_tokens,
            output_tokens=u.output_tokens + usage.output_tokens,
            reasoning_tokens=u.reasoning_tokens + usage.reasoning_tokens,
            cached_tokens=u.cached_tokens + usage.cached_tokens,
        )
