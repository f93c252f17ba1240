"""Deferred background work: responses with ``background_options.completion_window`` wait in the shared queue and run
when interactive load leaves room, interactive requests first, each before its window ends, on whichever instance
has room.

How this works: :meth:`DeferredWork.enqueue` (the create route) validates the request as a create would (routing: an
unknown pinned model is a 400 now, not hours later), stores the response record as ``queued`` (retrievable and
cancellable at once, from any instance) and puts the request body in the queue (store/deferred_queue.py) with its
deadline: ``soonest`` ends ``deferred_soonest_seconds`` after it was queued, ``2h`` and ``8h`` after that long.

Every instance runs :meth:`DeferredWork.run`: every ``deferred_poll_seconds`` it publishes the queue's depth and
ages to ``/metrics``, and while it runs fewer than ``deferred_concurrency`` deferred responses it takes the waiting
one with the earliest deadline, provided at most ``deferred_max_interactive`` interactive (non-background) responses
are running here; when there are more, it takes only one whose window ends within ``deferred_urgent_seconds``. A
taken response is leased to this instance (``lease_seconds``, renewed while it runs) and started through the
ordinary service under its own id; when it ends, it leaves the queue. The run writes its log to a private memory
store: ``response.created`` (and the lifecycle events after it) is published to the shared log at once, the rest
when the run has ended. So when an instance dies (or shuts down) mid-run, nothing half-streamed is left behind: its
lease runs out and another instance takes the response over and runs it again, continuing the shared log after the
published start. A response whose window ended before any instance could start it fails with
``completion_window_expired``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from respstream.server.config import Config
from respstream.server.events.response_object import new_response, sampling_defaults_of
from respstream.server.events.writer import ResponseWriter
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.responses.log_ending import flush_terminal
from respstream.server.responses.responses_service import QueuedStart, ResponseService
from respstream.server.store.base import ResponseRecord, SequenceConflict, Store
from respstream.server.store.deferred_queue import DeferredQueue, QueuedWork
from respstream.server.store.memory import MemoryStore
from respstream.server.store.split import SplitStore, backend_of

__all__ = ["WINDOW_SECONDS", "DeferredWork"]

log = logging.getLogger("respstream.server")

WINDOW_SECONDS = {"2h": 2 * 3600.0, "8h": 8 * 3600.0}  # soonest: Config.deferred_soonest_seconds
_FINISHED = frozenset({"completed", "incomplete", "cancelled"})


class DeferredWork:
    """The deferred-work scheduler of one instance. ``parse`` turns a stored body back into a request."""

    def __init__(self, svc: ResponseService, queue: DeferredQueue, config: Config,
                 parse: Callable[[dict[str, Any]], ResponseRequest]) -> None:
        self.svc = svc
        self.queue = queue
        self.config = config
        self.parse = parse
        self.holder = config.instance_id or "instance"
        self.running: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()

    # -- create ------------------------------------------------------------------------------------------------------
    def window_seconds(self, window: str) -> float:
        return WINDOW_SECONDS.get(window, self.config.deferred_soonest_seconds)

    async def enqueue(self, body: dict[str, Any], req: ResponseRequest, owner: str | None) -> ResponseRecord:
        """Store ``req`` as a queued response and queue it. Raises :class:`HTTPError` as a create does."""
        window = req.options.completion_window
        assert window is not None
        svc = self.svc
        if svc.closing:
            raise HTTPError(503, "server_shutdown", "The server is shutting down.", headers={"Retry-After": "1"})
        decision = await svc.route(req)  # an unknown pinned model is refused now
        created = time.time()
        rid = svc.dialect.new_id("resp")
        response = new_response(rid, req, created=created, model=decision.model_id, dialect=svc.dialect,
                                defaults=sampling_defaults_of(getattr(decision, "upstream", None)))
        response["background_options"] = {"completion_window": window}
        record = ResponseRecord(id=rid, status="queued", created_at=created, background=True,
                                dialect=svc.dialect.name, owner=owner, instance_id=None, response=response,
                                conversation_id=req.conversation_id)
        await self._store_for(record).create(record)
        await self.queue.put(QueuedWork(response_id=rid, owner=owner, body=body, window=window,
                                        enqueued_at=created, deadline=created + self.window_seconds(window)))
        self._wake.set()
        return record

    def _store_for(self, record: ResponseRecord) -> Store:
        store = self.svc.store
        return store.backend_for(record) if isinstance(store, SplitStore) else store

    async def cancel_queued(self, response_id: str) -> bool:
        """Cancel a response still waiting in the queue (no instance holds it): its log gets ``response.created``
        and the cancel terminal. False when it is not waiting (running somewhere, or not deferred)."""
        if not await self.queue.remove_waiting(response_id, time.time()):
            return False
        record = await backend_of(self.svc.store, response_id).get(response_id)
        if record is not None and record.status == "queued":
            await self._end_unstarted(record, "cancelled", "The response was cancelled.")
        return True

    async def _end_unstarted(self, record: ResponseRecord, code: str, message: str) -> None:
        store = backend_of(self.svc.store, record.id)
        writer = ResponseWriter(record, dialect=self.svc.dialect, store=store, response=dict(record.response),
                                check=False)
        writer.start()
        writer.fail(code, message)
        await flush_terminal(writer, self.config.lease_seconds)
        record.response = writer.response
        await store.update(record)

    # -- the scheduler -----------------------------------------------------------------------------------------------
    def _interactive(self) -> int:
        return sum(1 for r in self.svc.running.values() if not r.background and not r.task.done())

    async def run(self) -> None:
        """The scheduler loop (until cancelled). Never raises: a store outage is logged and retried."""
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("deferred work: %s: %s", type(exc).__name__, exc)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.deferred_poll_seconds)

    async def step(self) -> int:
        """Publish the queue's metrics and start what there is room for. Returns how many were started."""
        now = time.time()
        stats = await self.queue.stats(now)
        self.svc.metrics.set_deferred(waiting=stats.waiting, taken=stats.taken, oldest_wait=stats.oldest_wait,
                                      least_slack=stats.least_slack)
        started = 0
        while len(self.running) < self.config.deferred_concurrency and not self.svc.closing:
            busy = self._interactive() > self.config.deferred_max_interactive
            due_by = now + self.config.deferred_urgent_seconds if busy else None
            work = await self.queue.take(self.holder, self.config.lease_seconds, time.time(), due_by)
            if work is None:
                break
            task = asyncio.get_running_loop().create_task(self._hold(work), name=f"deferred {work.response_id}")
            self.running[work.response_id] = task
            task.add_done_callback(functools.partial(self._finished, work.response_id))
            started += 1
        return started

    def _finished(self, response_id: str, _task: asyncio.Task[None]) -> None:
        self.running.pop(response_id, None)
        self._wake.set()  # room for the next one

    async def _hold(self, work: QueuedWork) -> None:
        """Run ``work`` while renewing its lease; leave the queue when it has ended."""
        renewal = asyncio.get_running_loop().create_task(self._renew(work.response_id))
        try:
            finished = await self._execute(work)
        except Exception:  # the store failed under it: its lease runs out and an instance tries again
            log.exception("deferred response %s could not be run; it stays queued", work.response_id)
        else:
            if finished:
                await self.queue.done(work.response_id)
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal

    async def _renew(self, response_id: str) -> None:
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                if not await self.queue.renew(response_id, self.holder, self.config.lease_seconds, time.time()):
                    log.warning("deferred response %s: its queue lease was lost", response_id)
                shared = await backend_of(self.svc.store, response_id).get(response_id)
                if shared is None or shared.status == "cancelled":  # cancelled (or deleted) on another instance
                    self.svc.cancel_running(response_id)
            except Exception as exc:  # a brief store outage: the next renewal may work
                log.warning("deferred response %s: lease renewal failed: %s", response_id, exc)

    async def _execute(self, work: QueuedWork) -> bool:
        """Run one taken response to its end. True when it is finished with (it leaves the queue); False when it
        must run again elsewhere."""
        metrics = self.svc.metrics
        shared = backend_of(self.svc.store, work.response_id)
        record = await shared.get(work.response_id)
        if record is None or record.status in _FINISHED or record.status == "failed":
            metrics.deferred_run("dropped")  # deleted, cancelled, or ended by the instance that died
            return True
        published = await shared.read(work.response_id, -1, limit=1000)  # a dead instance's published head
        if time.time() > work.deadline:
            metrics.deferred_run("expired")
            if not published:
                await self._end_unstarted(record, "completion_window_expired",
                                          f"The response's completion window ({work.window}) ended before it "
                                          "could run.")
            return True
        private = MemoryStore()
        try:
            req = self.parse(work.body)
            await self.svc.start(req, owner=work.owner, local=private,
                                 queued=QueuedStart(work.response_id, work.enqueued_at))
        except HTTPError as exc:  # refused now (a previous response gone, a model no longer served): end it, naming
            metrics.deferred_run("dropped")
            if not published:
                await self._end_unstarted(record, exc.code, exc.message)
            return True
        metrics.deferred_run("took_over" if record.status != "queued" else "ran")
        try:
            # The start (response.created) goes out at once; the rest when the run has ended (see the module doc).
            await self._publish(work.response_id, private, shared, status="in_progress")
            await self.svc.wait(work.response_id)
            if self.svc.closing:
                # Ended by this instance's shutdown: not published; its lease runs out and another instance (or
                # this one after its restart) runs it again.
                log.info("deferred response %s: left to another instance (shutting down)", work.response_id)
                return False
            await self._publish(work.response_id, private, shared)
        except (SequenceConflict, KeyError):  # cancelled or deleted from elsewhere meanwhile: nothing to add
            self.svc.cancel_running(work.response_id)
        return True

    async def _publish(self, response_id: str, private: Store, shared: Store, status: str | None = None) -> None:
        """Append what the private log holds past what the shared log has, and copy the record over."""
        last = -1
        while batch := await shared.read(response_id, last, limit=1000):
            last = batch[-1].sequence_number
        entries = await private.read(response_id, last)
        if entries:
            await shared.append(response_id, entries)
        final = await private.get(response_id)
        if final is not None:
            if status is not None and final.status == "queued":
                final.status = status
                final.response = {**final.response, "status": status}
            await shared.update(final)
