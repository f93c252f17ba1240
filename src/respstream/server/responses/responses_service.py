"""Responses as running work: create (route, record, start the pipeline), cancel, delete, shutdown.

How this works: :meth:`ResponseService.start` validates what needs the store (``previous_response_id``,
``conversation_id``) and the router (an unknown pinned model is a 400), creates the record, queues
``response.created`` and starts the pipeline as a task. The HTTP layer then streams the log, returns the Response
JSON when the task ends, or (background without stream) returns the queued Response at once. Running tasks are kept
by id so cancel/delete/disconnect/shutdown can cancel them; the pipeline turns a cancellation into the terminal.
Routing with its errors is :mod:`~respstream.server.responses.route_decision`; ending a log whose writer cannot
(store outage, lost terminal, a response running on another instance) is :mod:`~respstream.server.responses.log_ending`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from respstream.server.config import Config
from respstream.server.events.dialects import Dialect, get_dialect
from respstream.server.events.response_object import new_response, sampling_defaults_of
from respstream.server.events.writer import ResponseWriter, WriterClosed
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.context_limit import check_context, context_limit
from respstream.server.inputs.fetch_budget import FetchBudget, FetchHold
from respstream.server.inputs.history import items_to_messages, output_to_items
from respstream.server.inputs.input_files import resolve_file_urls
from respstream.server.inputs.input_parts import check_modalities
from respstream.server.inputs.input_records import input_item_records
from respstream.server.inputs.response_chain import record_request
from respstream.server.inputs.response_inputs import context_and_base, mcp_toolbox, request_context
from respstream.server.inputs.response_request import InputItem, ResponseRequest
from respstream.server.inputs.structured_output import check_schema
from respstream.server.inputs.truncation import fit_context
from respstream.server.model_catalog import ModelCatalog
from respstream.server.responses.collaborators import RewriterLike, RouterLike, ToolsLike
from respstream.server.responses.compaction_step import compact_step, plan_compaction
from respstream.server.responses.key_quota import KeyQuota, stored_bytes
from respstream.server.responses.log_ending import end_log, end_response, flush_terminal
from respstream.server.responses.pipeline import Pipeline
from respstream.server.responses.route_decision import check_upstream_accepts, check_upstream_up, route_request
from respstream.server.store.base import ResponseRecord, SequenceGap, Store, StoreUnavailable
from respstream.server.store.split import SplitStore, backend_of
from respstream.server.telemetry import Tracing, current_request
from respstream.server.telemetry.metrics import Metrics
from respstream.server.telemetry.response import ResponseTelemetry
from respstream.server.telemetry.spans import NO_SPAN_CM

__all__ = ["QueuedStart", "ResponseService", "Running"]

log = logging.getLogger("respstream.server")

@dataclass(slots=True, frozen=True)
class QueuedStart:
    """A deferred response starting under its queued id and creation time (its log goes to ``local`` first)."""

    response_id: str
    created_at: float


@dataclass(slots=True)
class Running:
    task: asyncio.Task[None]
    pipeline: Pipeline
    background: bool
    store: Store  # where its log is written (a WebSocket's own store for store:false on a socket)
    owner: str | None = None  # the API key's owner id (None on an open gateway)


class ResponseService:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        router: RouterLike,
        tools: ToolsLike,
        rewriter: RewriterLike,
        metrics: Metrics,
        tracing: Tracing | None = None,
    ) -> None:
        self.config = config
        self.dialect: Dialect = get_dialect(config.dialect)
        self.store = store
        self.router = router
        self.tools = tools
        self.rewriter = rewriter
        self.metrics = metrics
        metrics.tool_names = frozenset(tools.names())  # tool metric labels: these, else "other"
        self.tracing = tracing or Tracing(config.telemetry_settings())
        self.running: dict[str, Running] = {}
        self._closing = False
        self.catalog = ModelCatalog.from_config(config.models)
        self._forgetting: set[asyncio.Task[None]] = set()  # store: false responses waiting to be deleted
        caps = config.work_limits()
        self.quota = KeyQuota(caps.store_max_bytes_per_key, config.retention_seconds)
        self.fetch_budget = FetchBudget(total=caps.file_urls_inflight_bytes,
                                        per_key=caps.file_urls_inflight_bytes_per_key)
        # The gateway's last health report of an upstream by name (telemetry/health.py), or None before one.
        self.upstream_state: Callable[[str], dict[str, Any] | None] | None = None

    @property
    def closing(self) -> bool:
        """True once shutdown began (new responses get 503)."""
        return self._closing

    # -- create ----------------------------------------------------------------------------------------------------
    async def context(self, req: ResponseRequest, owner: str | None, local: Store | None = None) -> list[InputItem]:
        return await request_context(self.store, self.config, req, owner, local)

    async def route(self, req: ResponseRequest) -> Any:
        """The routing decision for ``req``. Raises a 400 ``model_not_found`` for an unknown pinned model."""
        return await route_request(req, router=self.router, catalog=self.catalog, tracing=self.tracing)

    async def start(self, req: ResponseRequest, *, owner: str | None,
                    local: Store | None = None, queued: QueuedStart | None = None) -> tuple[ResponseRecord, Running]:
        """Create and start a response. Raises :class:`HTTPError` (400 model/previous id, 503 store/shutdown).

        ``local``: a WebSocket connection's own store. A ``store: false`` response is written there only (gone
        when the socket closes) and ``previous_response_id`` is looked up there first. ``queued``: a deferred
        response taken from the queue (responses/deferred.py) starts under its own id, its log in ``local`` (the
        scheduler publishes it to the shared store)."""
        if req.ignored_fields and queued is None:
            self.report_ignored(req, "websocket" if local is not None else "http")
        if self._closing:
            raise HTTPError(503, "server_shutdown", "The server is shutting down.", headers={"Retry-After": "1"})
        if queued is None and req.background and self.background_running() >= self.config.max_background_responses:
            # Background work outlives its request, so the stream limit does not bound it: this does.
            raise HTTPError(429, "too_many_background_responses",
                            f"{self.config.max_background_responses} background responses are already running "
                            "(max_background_responses); retry when one has finished.", headers={"Retry-After": "5"})
        per_key = self.config.max_background_responses_per_key
        if queued is None and req.background and owner is not None and self.background_running(owner) >= per_key:
            # One key must not take the whole background budget from every other key.
            raise HTTPError(429, "too_many_background_responses",
                            f"This API key already has {per_key} background responses running "
                            "(max_background_responses_per_key); retry when one has finished.",
                            headers={"Retry-After": "5"})
        await check_schema(req.options.text_format)  # in a validation process, never on this loop
        began = time.perf_counter()
        try:
            items, base, parent = await context_and_base(self.store, self.config, req, owner, local)
        except StoreUnavailable as exc:
            raise HTTPError(503, "store_unavailable", f"The response store is unavailable: {exc}",
                            headers={"Retry-After": "1"}) from exc
        pinned = self.catalog.resolve(req.model) != "auto"
        decision = await self.route(req)
        check_upstream_up(req, decision, router=self.router, catalog=self.catalog, state_of=self.upstream_state,
                          every=self.config.upstream_probe_seconds)
        mcp = await mcp_toolbox(self.store, self.config, req, owner, local)
        if req.media:
            check_modalities(req.media, decision.model_id, self.catalog.modalities(decision.model_id,
                                                                                   decision.upstream))
        created = time.time() if queued is None else queued.created_at
        rid = self.dialect.new_id("resp") if queued is None else queued.response_id
        response = new_response(rid, req, created=created, model=decision.model_id, dialect=self.dialect,
                                defaults=sampling_defaults_of(getattr(decision, "upstream", None)))
        stored = record_request(parent=parent, base=base, store=req.store,
                                input_items=input_item_records(req.input, self.dialect))
        charged = owner if req.store is not False else None  # store:false is deleted once its client has it
        request_bytes = stored_bytes(stored)
        self.quota.check(charged, request_bytes)
        record = ResponseRecord(
            id=rid, status="queued" if req.background else "in_progress", created_at=created,
            background=req.background, dialect=self.dialect.name, owner=owner, instance_id=self.config.instance_id,
            response=response,
            request=stored,
            conversation_id=req.conversation_id,
        )
        if local is not None and (not req.store or queued is not None):
            target: Store = local
        else:
            target = self.store.backend_for(record) if isinstance(self.store, SplitStore) else self.store
        check_room = getattr(target, "check_room", None)
        if check_room is not None:
            try:
                check_room(record)  # a full memory store refuses now, before anything is fetched
            except StoreUnavailable as exc:
                raise HTTPError(503, "store_unavailable", f"The response store is unavailable: {exc}",
                                headers={"Retry-After": "1"}) from exc
        # The cheap checks (quota, store room) came first; what the fetched files hold is reserved before any
        # fetch, kept until the response ends (inputs/fetch_budget.py).
        files = await resolve_file_urls(req.media, self.tools, budget=self.fetch_budget, owner=owner)
        try:
            return await self._begin(req, record, target, decision, pinned=pinned, items=items, mcp=mcp,
                                     began=began, files=files, charged=charged, request_bytes=request_bytes)
        except BaseException:
            if files is not None:
                files.release()
            raise

    async def _begin(self, req: ResponseRequest, record: ResponseRecord, target: Store, decision: Any, *,
                     pinned: bool, items: list[InputItem], mcp: Any, began: float, files: FetchHold | None,
                     charged: str | None, request_bytes: int) -> tuple[ResponseRecord, Running]:
        """The rest of :meth:`start` once the request's files are in: the prompt, the log, the pipeline task."""
        rid, response = record.id, record.response
        messages = items_to_messages(req.instructions, items)
        check_upstream_accepts(req, decision, messages)
        limit = context_limit(decision.model_id, decision.upstream, self.catalog)
        if limit is not None and req.options.truncation == "auto":
            # Drops the oldest turns by the rough estimate; what cannot be made to fit is left to the check below.
            with contextlib.suppress(HTTPError):
                messages = fit_context(messages, window=limit.tokens, max_output_tokens=req.max_output_tokens,
                                       truncation="auto", model=decision.model_id)
        compaction = await plan_compaction(req, items, messages, limit=limit, upstream=decision.upstream,
                                           model_id=decision.model_id)
        if compaction is None:  # a compacting response is measured after its compaction
            await check_context(messages, limit=limit, max_output_tokens=req.max_output_tokens,
                                upstream=decision.upstream, model_id=decision.model_id)
        writer = ResponseWriter(record, dialect=self.dialect, store=target, response=response,
                                check=self.config.check_events, on_flush=self.metrics.count_events,
                                max_event_bytes=self.config.max_event_bytes,
                                routing_event=(self.dialect.name != "openresponses"
                                               or self.config.openresponses_routing_event))
        with contextlib.suppress(WriterClosed):  # response.created over max_event_bytes: the log holds the error
            writer.start(preamble=req.generate)  # a prewarm (generate: false): created, then completed
        obs = current_request()
        if obs is not None:
            obs.response_id, obs.model, obs.dialect = rid, decision.model_id, self.dialect.name
        self.quota.charge(charged, request_bytes)
        try:
            with self.tracing.span("store create", {"gen_ai.response.id": rid}):
                await target.create(record)
                if getattr(target, "keeps_request_apart", False):  # stored encoded; its updates never need it
                    record.request = {}  # a running response holds no second copy (issue 42 H4v)
                await writer.flush()
        except StoreUnavailable as exc:
            raise HTTPError(503, "store_unavailable", f"The response store is unavailable: {exc}",
                            headers={"Retry-After": "1"}) from exc
        pipeline = Pipeline(
            writer=writer, request=req, decision=decision, pinned=pinned,
            messages=messages, router=self.router, tools=self.tools,
            rewriter=self.rewriter, max_tool_rounds=self.config.max_tool_rounds, on_tool=self.metrics.tool,
            mcp=mcp, max_citations=getattr(getattr(self.tools, "config", None), "max_citations", 64),
        )
        pipeline.progress_seconds = self.config.progress_event_seconds
        if compaction is not None:
            plan = compaction
            pipeline.prelude = lambda p: compact_step(p, self, plan, record.owner)
        pipeline.telemetry = ResponseTelemetry(metrics=self.metrics, tracing=self.tracing, started=began,
                                               observation=obs)
        task = asyncio.create_task(self._run(pipeline, record, req, target), name=f"response {rid}")
        if files is not None:  # the fetched files live in the prompt until the response ends
            task.add_done_callback(lambda _: files.release())
        running = Running(task, pipeline, req.background, target, record.owner)
        self.running[rid] = running
        self.metrics.set_running(len(self.running))
        return record, running

    def report_ignored(self, req: ResponseRequest, transport: str) -> None:
        """A log line and the counter for the request fields nobody here knows (inputs/field_policy.py)."""
        self.metrics.ignored(transport, len(req.ignored_fields))
        log.info("request over %s: ignored unknown fields %s (strict_fields = false)", transport,
                 ", ".join(req.ignored_fields))

    async def _run(self, pipeline: Pipeline, record: ResponseRecord, req: ResponseRequest, store: Store) -> None:
        span_cm: contextlib.AbstractContextManager[Any] = NO_SPAN_CM  # tracing off: no name, attributes (issue 41)
        if self.tracing.enabled:
            span_cm = self.tracing.span(f"chat {req.model}", {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": req.model, "gen_ai.response.id": record.id,
                "gen_ai.provider.name": "respstream", "gen_ai.request.max_tokens": req.max_output_tokens,
                "gen_ai.request.temperature": req.temperature, "respstream.background": req.background,
                "respstream.dialect": self.dialect.name, "gen_ai.input.messages": self.tracing.content(req.input_text)})
        with span_cm as span:
            await self._run_traced(pipeline, record, req, store)
            pipeline.telemetry.observe_end(pipeline, record, span, dialect=self.dialect.name)

    async def _run_traced(self, pipeline: Pipeline, record: ResponseRecord, req: ResponseRequest,
                          store: Store) -> None:
        writer = pipeline.writer
        try:
            try:
                if req.background:
                    writer.mark_in_progress()
                    await store.update(record)
                async with store.hold_lease(record.id):
                    # From here a store outage shorter than the lease (a Redis failover) only stalls the stream.
                    writer.retry_unavailable_seconds = self.config.lease_seconds
                    # Every failure is settled while we still hold the lease: once it is released, a reader may
                    # end the unfinished log with `worker_lost` first and our precise terminal would be refused.
                    try:
                        await pipeline.run()
                    except StoreUnavailable:
                        await flush_terminal(writer, self.config.lease_seconds)  # readers wait for our terminal
                    except SequenceGap as exc:  # a failover lost events the store could not resend: no hole, fail
                        log.error("response %s: %s", record.id, exc)
                        await end_response(writer, store, "store_unavailable",
                                           f"The response store lost events of this response: {exc}",
                                           self.config.lease_seconds)
                    except Exception:
                        log.exception("response %s: storing it failed", record.id)
                        await end_response(writer, store, "internal_error", "the response could not be stored",
                                           self.config.lease_seconds)
            except StoreUnavailable as exc:  # could not mark it running or take (or give back) the lease
                writer.fail("store_unavailable", f"The response store failed: {exc}")
                await flush_terminal(writer, self.config.lease_seconds)
            except Exception:
                log.exception("response %s: storing it failed", record.id)
                await end_response(writer, store, "internal_error", "the response could not be stored",
                                   self.config.lease_seconds)
            if writer.repairs:
                self.metrics.repairs(writer.repairs)
            if req.conversation_id and record.status in ("completed", "incomplete"):
                new = input_item_records(req.input, self.dialect)
                if pipeline.compaction_item is not None:  # the conversation's history restarts at the compaction
                    at = len(new) - pipeline.compaction_tail
                    new[at:at] = [pipeline.compaction_item]
                new += input_item_records(output_to_items(writer.response.get("output", [])), self.dialect)
                try:
                    self.quota.charge(record.owner, stored_bytes(new))
                    await self.store.extend_conversation(req.conversation_id, new)
                except Exception:  # the response itself is complete and stored; only the history missed a turn
                    log.exception("response %s: conversation %s not extended", record.id, req.conversation_id)
        finally:
            if req.store is not False:  # the snapshot and the event log
                self.quota.charge(record.owner, 2 * stored_bytes(writer.response))
            self.running.pop(record.id, None)
            self.metrics.set_running(len(self.running))

    def forget_when_done(self, response_id: str) -> None:
        """``store: false``: delete the response once its generation has ended and its reader is done with it
        (called when the foreground stream closes or the JSON answer is built). GET then says 404."""
        async def forget() -> None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.wait(response_id)
            try:
                await self.store.delete(response_id)
            except Exception:  # it expires with the retention period anyway
                log.warning("response %s (store: false) could not be deleted", response_id, exc_info=True)

        task = asyncio.get_running_loop().create_task(forget(), name=f"forget {response_id}")
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    # -- control ---------------------------------------------------------------------------------------------------
    def cancel_running(self, response_id: str, code: str = "cancelled", message: str | None = None) -> bool:
        running = self.running.get(response_id)
        if running is None or running.task.done():
            return False
        running.pipeline.cancel_code = code
        if message:
            running.pipeline.cancel_message = message
        # Asked for: the pipeline ends `code`. A task cancelled before its first step never runs its body, so no
        # terminal would be written: an unstarted one starts and ends itself as cancelled instead.
        running.pipeline.cancel_requested = True
        if running.pipeline.started:
            running.task.cancel()
        return True

    def on_client_gone(self, response_id: str) -> None:
        """A foreground stream's client disconnected: stop generating (frees the upstream connection)."""
        running = self.running.get(response_id)
        if running is not None and not running.background:
            self.cancel_running(response_id, "cancelled", "The client disconnected.")

    def background_running(self, owner: str | None = None) -> int:
        """Background responses running (of ``owner`` only, when given)."""
        return sum(1 for r in self.running.values() if r.background and not r.task.done()
                   and (owner is None or r.owner == owner))

    async def wait(self, response_id: str) -> None:
        running = self.running.get(response_id)
        if running is not None:
            await asyncio.shield(running.task)

    async def cancel(self, response_id: str) -> None:
        """Cancel and wait until the terminal is written (idempotent). A response generating on another gateway
        instance (shared store) is cancelled through its log: we append the cancel terminal; its writer's next
        append is refused and it stops. Raises ``StoreUnavailable``."""
        if self.cancel_running(response_id):
            with contextlib.suppress(asyncio.CancelledError):
                await self.wait(response_id)
            return
        await self._cancel_elsewhere(response_id)

    async def _cancel_elsewhere(self, response_id: str) -> None:
        await end_log(backend_of(self.store, response_id), response_id, "cancelled", "The response was cancelled.",
                      running=self.running)

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop taking new responses (503 ``server_shutdown``), end every foreground response now with ``error``
        ``server_shutdown`` (its open stream gets that terminal and closes cleanly), give background responses
        ``grace`` seconds (default ``shutdown_grace_seconds``) to finish and persist, end the rest the same way (a
        durable store keeps the log for a restarted instance) and wait for the terminals. Idempotent."""
        self._closing = True
        grace = self.config.shutdown_grace_seconds if grace is None else grace
        message = "The server is shutting down."
        for rid, running in list(self.running.items()):
            if not running.background:
                self.cancel_running(rid, "server_shutdown", message)
        background = [r.task for r in self.running.values() if r.background]
        if background and grace > 0:
            await asyncio.wait(background, timeout=grace)
        for rid in list(self.running):
            self.cancel_running(rid, "server_shutdown", message)
        tasks = [r.task for r in self.running.values()]
        if tasks:  # terminals being flushed; a store that is down must not hold the exit forever
            await asyncio.wait(tasks, timeout=max(1.0, grace))
