"""``/v1/responses`` over HTTP: create (JSON, or the log streamed as SSE), retrieve (JSON, or the stream resumed
after ``starting_after`` / ``Last-Event-ID``; ``204`` when that is at or past the terminal), cancel and delete.

Each handler takes the :class:`~respstream.server.http.app_gateway.AppGateway` first (``functools.partial`` in the
route table). A stream passes the stream limits (this instance's gate and, when configured, the shared one) before
its :class:`~respstream.server.http.sse_response.EventStreamResponse` is made.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from respstream.server.http.app_gateway import AppGateway
from respstream.server.http.sse_response import EventStreamResponse
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.field_policy import IGNORED_FIELDS_HEADER
from respstream.server.inputs.request_memory import RequestHold, decoded_bound, held_bytes
from respstream.server.inputs.requests import parse_request
from respstream.server.responses.log_ending import TERMINAL_STATUSES
from respstream.server.routing.affinity import affinity_key
from respstream.server.store.split import backend_of

__all__ = ["MAX_CURSOR", "cancel", "create", "delete", "retrieve", "stream_response"]

MAX_CURSOR = (1 << 53) - 1  # largest resume cursor (sequence number) accepted


async def stream_response(gw: AppGateway, rid: str, after: int, *, foreground: bool,
                           headers: list[tuple[bytes, bytes]] | None = None,
                           forget: bool = False) -> EventStreamResponse:
    svc = gw.svc
    shared = gw.shared
    if shared is not None and not await shared.enter_stream():
        raise HTTPError(503, "too_many_streams", "Too many open streams across the gateway's instances; retry "
                        "shortly.", headers={"Retry-After": "1"})
    if not gw.gate.try_enter():
        if shared is not None:
            shared.leave_stream()
        raise HTTPError(503, "too_many_streams", "Too many open streams; retry shortly.",
                        headers={"Retry-After": "1"})
    gw.metrics.set_open_streams(gw.gate.open)

    def closed() -> None:
        gw.gate.leave()
        if shared is not None:
            shared.leave_stream()
        gw.metrics.set_open_streams(gw.gate.open)
        if forget:  # store: false: nothing is kept once its stream has ended
            svc.forget_when_done(rid)

    def cut_slow_reader() -> None:  # the log then ends with slow_reader, not "the client disconnected"
        svc.cancel_running(rid, "slow_reader", "The client stopped reading.")

    return EventStreamResponse(
        store=backend_of(svc.store, rid), response_id=rid, after=after, dialect=svc.dialect,
        keepalive_seconds=gw.config.keepalive_seconds, headers=headers or [],
        on_disconnect=(lambda: svc.on_client_gone(rid)) if foreground else None, on_close=closed,
        on_slow_reader=cut_slow_reader if foreground else None,
        slow_reader_timeout=gw.config.slow_reader_timeout_seconds,
    )


async def create(gw: AppGateway, request: Request) -> Response | EventStreamResponse:
    owner = gw.authenticate(request)
    await gw.limit_rate(request, owner)
    body, hold = await _read_reserved(gw, request, owner)
    try:
        answer = await _create(gw, request, owner, body, hold)
    except BaseException:
        hold.release()
        raise
    return answer


async def _read_reserved(gw: AppGateway, request: Request, owner: str | None) -> tuple[Any, RequestHold]:
    """The body, decoded under a reservation of the memory it can take, settled to what it takes
    (inputs/request_memory.py: 503/429 ``request_memory_budget_exceeded`` before decoding)."""
    holds: list[tuple[RequestHold, int]] = []

    def reserve(raw: bytes) -> None:
        holds.append((gw.request_memory.reserve(owner, decoded_bound(raw)), len(raw)))

    try:
        body = await gw.read_json(request, before_decode=reserve)
    except BaseException:
        for hold, _ in holds:
            hold.release()
        raise
    hold, length = holds[0]
    hold.settle(held_bytes(body, length))
    return body, hold


async def _create(gw: AppGateway, request: Request, owner: str | None, body: Any,
                  hold: RequestHold) -> Response | EventStreamResponse:
    svc = gw.svc
    req = parse_request(body, server_tool_names=svc.tools.names(), dialect=svc.dialect.name,
                        strict_fields=gw.config.strict_fields)
    req.affinity = affinity_key(request.headers, req.prompt_cache_key)
    stream = req.stream
    if stream is None:  # absent means JSON (the standard, issue #29); platform: SSE when Accept asks for it
        stream = (svc.dialect.stream_on_accept and not req.background
                  and _wants_event_stream(request.headers.get("accept", "")))
    if stream and gw.gate.open >= gw.gate.limit:
        raise HTTPError(503, "too_many_streams", "Too many open streams; retry shortly.",
                        headers={"Retry-After": "1"})
    if req.options.completion_window is not None and gw.deferred is not None:
        # Deferred work: queued in the shared store, run by whichever instance has room (responses/deferred.py).
        record = await gw.deferred.enqueue(body, req, owner)
        hold.release()  # queued (in the store): what runs it later is another request's work
        if stream:
            return await stream_response(gw, record.id, -1, foreground=False,
                                         headers=[(b"x-response-id", record.id.encode())])
        return JSONResponse(record.response, headers={"x-response-id": record.id})
    record, running = await svc.start(req, owner=owner)
    running.task.add_done_callback(lambda _: hold.release())  # the prompt lives until the response ends
    # The id in a header, so a client whose connection drops inside the first event can still resume (or
    # cancel) a background response.
    id_header = {"x-response-id": record.id}
    if req.ignored_fields:  # accepted, not silently: the client sees what it sent that nothing read
        id_header[IGNORED_FIELDS_HEADER] = ", ".join(req.ignored_fields)
    # store: false -> not kept once the client has it (the stream ended, or the JSON is built).
    if stream:
        response = await stream_response(gw, record.id, -1, foreground=not req.background,
                                         headers=[(k.encode(), v.encode()) for k, v in id_header.items()],
                                         forget=not req.store)
        # Its stream slot taken, let the pipeline run to its first wait (the upstream request written) before our
        # head goes out: the upstream answers while we send the head and response.created, so the rest is usually
        # there when we next wait: one sleep and wake-up fewer a request, each of which can cost a scheduler time
        # slice on a loaded machine (docs/benchmarks.md, issue 41: 1.07 -> 0.93 ms added at p50).
        await asyncio.sleep(0)
        return response
    if req.background:
        return JSONResponse(record.response, headers=id_header)
    await svc.wait(record.id)
    final = await svc.store.get(record.id)
    if not req.store:
        svc.forget_when_done(record.id)
    return JSONResponse(final.response if final is not None else record.response, headers=id_header)


async def retrieve(gw: AppGateway, request: Request) -> Response | EventStreamResponse:
    record = await gw._record(request)
    if request.query_params.get("stream", "").lower() not in ("true", "1"):
        return JSONResponse(record.response)
    # An EventSource reconnect keeps the original URL (with its starting_after) and adds Last-Event-ID: the
    # larger cursor is where the client really is.
    after = max(_cursor(request.query_params.get("starting_after"), "starting_after"),
                _cursor(request.headers.get("last-event-id"), "Last-Event-ID"))
    store = gw.svc.store
    if not await store.read(record.id, after, limit=1):
        fresh = await store.get(record.id)
        if fresh is None or fresh.status in TERMINAL_STATUSES:
            return Response(status_code=204)
    return await stream_response(gw, record.id, after, foreground=False)


async def cancel(gw: AppGateway, request: Request) -> Response:
    record = await gw._record(request)
    if gw.deferred is None or not await gw.deferred.cancel_queued(record.id):  # (still queued: ended right there)
        await gw.svc.cancel(record.id)
    final = await gw.svc.store.get(record.id)
    return JSONResponse((final or record).response)


async def delete(gw: AppGateway, request: Request) -> Response:
    record = await gw._record(request)
    if gw.deferred is None or not await gw.deferred.cancel_queued(record.id):
        await gw.svc.cancel(record.id)
    await gw.svc.store.delete(record.id)
    return JSONResponse({"id": record.id, "object": "response.deleted", "deleted": True})


def _cursor(raw: str | None, name: str) -> int:
    """A resume cursor (``-1`` when absent or empty). Raises a 400 :class:`HTTPError` naming ``name``."""
    if raw is None or not raw.strip():
        return -1
    text = raw.strip()
    try:
        after = int(text) if len(text) <= 24 else None
    except ValueError:
        raise HTTPError(400, "invalid_value", f"{name} must be an integer, not {raw[:40]!r}",
                        param="starting_after") from None
    # Every store takes this bound (SQLite's INTEGER and Redis stream ids are 64-bit; JSON clients lose precision
    # past 2^53): a larger cursor is a clear 400, never an overflow deep in a store.
    if after is None or not -1 <= after <= MAX_CURSOR:
        raise HTTPError(400, "invalid_value", f"{name} must be between -1 and {MAX_CURSOR}, not {raw[:40]!r}",
                        param="starting_after")
    return after


def _wants_event_stream(accept: str) -> bool:
    """True when ``Accept`` names ``text/event-stream`` (with a non-zero ``q``); ``*/*`` alone does not."""
    for part in accept.split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        if media == "text/event-stream":
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
    return False
