"""WebSocket mode of ``/v1/responses``: the transport (thin) around the sans-IO :class:`Session`.

How this works: the client upgrades ``GET /v1/responses`` (``Authorization: Bearer`` at the handshake, checked like
any HTTP request; a refused handshake gets the usual 401 JSON envelope as its HTTP answer; without API keys the
handshake's Host and Origin are checked first, as for HTTP: 403 ``host_not_allowed`` / ``cross_origin_request``).
A reader task takes every message into a bounded inbox (``websocket_max_queued_messages`` counting what waits on the
lanes too, and bytes per socket and in total: websocket/limits.py); the connection's loop feeds each to the session
and runs its actions. A :class:`~respstream.server.websocket.session.Start` becomes a task of its own: validated by
the same ``parse_request`` and started by the same ``ResponseService.start`` as ``POST /v1/responses``, its log sent
by :class:`~respstream.server.websocket.sender.WebSocketTurnSender` (one text message per event, ``stream_id`` on a
named lane); how it ended goes back to the session, which starts what waits. Lanes therefore interleave on the
socket, and one lane's failure ends only that lane's response.

``store: false`` responses are written to the connection's own store only (``websocket_cache_responses`` of them,
bytes bounded per key and in total), so ``previous_response_id`` continues them on this socket and nowhere else. An
idle (nothing running, no message for ``websocket_idle_timeout_seconds``) or too old connection is closed, saying
why; one whose key was revoked ends at its next message. Closing the socket cancels its foreground responses (as an
HTTP disconnect does); a ``background: true`` one runs on and stays retrievable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from respstream.server.endpoints.gateway import Gateway
from respstream.server.http import socket_reclaim
from respstream.server.http.web_security import check_open_websocket
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.request_memory import RequestHold, RequestMemory, decoded_bound, held_bytes
from respstream.server.inputs.requests import parse_request
from respstream.server.responses.turn_control import STEERED
from respstream.server.routing.affinity import affinity_key
from respstream.server.store.base import StoreUnavailable
from respstream.server.store.memory_budgeted import BudgetedMemoryStore
from respstream.server.store.split import backend_of
from respstream.server.websocket.actions import Action, Outcome, Send, Start, Stop
from respstream.server.websocket.events import error_event
from respstream.server.websocket.frame_writer import FrameWriter
from respstream.server.websocket.limits import (
    WebSocketBudgets,
    age_error,
    message_bytes,
    revoked_error,
    session_limits,
    wait_limit,
)
from respstream.server.websocket.sender import WebSocketTurnSender, lane_prefix
from respstream.server.websocket.session import Session

if TYPE_CHECKING:
    from respstream.server.http.auth import KeyStore
    from respstream.server.http.limits import StreamGate
    from respstream.server.inputs.response_request import ResponseRequest
    from respstream.server.responses.responses_service import Running
    from respstream.server.store.base import ResponseRecord
    from respstream.server.telemetry.metrics import Metrics

__all__ = ["serve_websocket"]

log = logging.getLogger("respstream.server")

_CLOSED = object()  # queued by the reader when the peer went away
_RECLAIMED = object()  # queued when the connection guard needs this idle socket's slot (http/socket_reclaim.py)
# Why a connection that queued too much is closed (code, reason), by the limit it broke.
_QUEUE_FULL = {
    "count": (1008, "too many messages queued (websocket_max_queued_messages)"),
    "holder": (1008, "too many bytes queued (websocket_max_queued_bytes)"),
    "total": (1013, "the server's WebSocket queues are full (websocket_max_queued_bytes_total); retry later"),
}


class _WebSocketGateway(Gateway, Protocol):
    """What the WebSocket mode needs of the app beyond an endpoint: the keys (open gateway or not), the stream
    gate and the metrics it reports open streams to. A Protocol, so this module need not import the app."""

    keys: KeyStore
    gate: StreamGate
    metrics: Metrics
    websocket_budgets: WebSocketBudgets
    request_memory: RequestMemory


class _Connection:
    """One WebSocket: its reader, its :class:`Session`, its own store, the tasks of its running responses."""

    def __init__(self, gw: _WebSocketGateway, ws: WebSocket, owner: str | None) -> None:
        self.gw = gw
        self.ws = ws
        self.owner = owner
        config = gw.config
        budgets = gw.websocket_budgets
        # Its store: false responses count against one budget shared by every connection (per key, and in total).
        self.local = BudgetedMemoryStore(budget=budgets.store, holder=owner if owner is not None else self,
                                         retention_seconds=config.websocket_max_connection_seconds,
                                         max_responses=config.websocket_cache_responses,
                                         max_bytes=config.websocket_store_max_bytes_per_key)
        self.queued = budgets.queued  # bytes of the messages waiting (in `inbox` or a lane), charged to this socket
        self.session = Session(session_limits(config), budget=self.queued, holder=self)
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.opened = time.monotonic()
        self.tasks: set[asyncio.Task[None]] = set()
        self.gone = False
        # Reservations of decoded creates that wait on a lane (their decode reservations, kept): given back, the
        # largest last, as the session's count of waiting creates drops (see _settle_waiting).
        self.waiting_holds: list[RequestHold] = []
        self.writer = FrameWriter.for_send(ws.scope.get("state", {}).get("raw_send"))

    async def send_text(self, text: str) -> None:
        await self.ws.send({"type": "websocket.send", "text": text})

    async def read_loop(self) -> None:
        """Read every message into the inbox (bounded with what waits on the lanes); the peer going away cancels
        the running responses."""
        limit = self.gw.config.websocket_max_queued_messages
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                data = text if text is not None else message.get("bytes") or b""
                waiting = self.inbox.qsize() + self.session.waiting
                refused = "count" if waiting >= limit else self.queued.take(self, message_bytes(data))
                if refused is not None:
                    with contextlib.suppress(Exception):
                        await self.ws.close(*_QUEUE_FULL[refused])
                    break
                self.inbox.put_nowait(data)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self.gone = True
            for task in list(self.tasks):
                task.cancel()
            self.inbox.put_nowait(_CLOSED)

    async def run(self) -> None:
        reader = asyncio.create_task(self.read_loop())
        try:
            while True:
                wait, expired = wait_limit(self.gw.config, time.monotonic() - self.opened)
                self._offer_idle()
                try:
                    async with asyncio.timeout(wait):
                        raw = await self.inbox.get()
                except TimeoutError:  # idle too long, or too old: close it, saying why
                    if self.session.busy and expired.code == "websocket_idle_timeout":
                        continue  # not idle: its responses are streaming
                    await self._close_with(expired, 1000)
                    return
                finally:
                    socket_reclaim.busy(self.ws.scope)
                if raw is _RECLAIMED:
                    await self._close_with(socket_reclaim.reclaimed_error(), socket_reclaim.RECLAIM_CODE)
                    return
                if raw is _CLOSED or self.gone:
                    return
                size = message_bytes(raw)
                if time.monotonic() - self.opened > self.gw.config.websocket_max_connection_seconds:
                    await self._close_with(age_error(self.gw.config), 1000)
                    return
                if self.owner is not None and not self.gw.keys.active(self.owner):
                    await self._close_with(revoked_error(), 1008)  # revoked while the socket was open
                    return
                await self._receive(raw, size)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            self.queued.adjust(self, -self.queued.held(self))  # what still waits is dropped with the socket
            for hold in self.waiting_holds:
                hold.release()
            await self.local.aclose()

    async def _receive(self, raw: str | bytes, size: int) -> None:
        """Decode and act on one message under a reservation of what its decoded JSON can take (issue 42, H4v:
        inputs/request_memory.py); refused, it is dropped with an error event naming the limit."""
        try:
            hold = self.gw.request_memory.reserve(self.owner, decoded_bound(raw.encode() if isinstance(raw, str)
                                                                            else raw))
        except HTTPError as exc:
            self.queued.adjust(self, -min(size, self.queued.held(self)))  # the session never saw it
            await self.execute([Send(error_event(exc))])
            return
        waiting = self.session.waiting
        try:
            actions = self.session.receive(raw, size)
        except BaseException:
            hold.release()
            raise
        if self.session.waiting > waiting:  # a create now waits on its lane, decoded: it keeps its reservation
            self.waiting_holds.append(hold)
        else:  # a create that starts reserves its measured size (_start); anything else is done with
            hold.release()
        await self.execute(actions)

    def _offer_idle(self) -> None:
        """Nothing queued, nothing running: the connection guard may reclaim this socket under pressure (issue 42,
        M8), with the spec's error event and close code 1013; from now on it counts for its API key."""
        if not self.gone and self.inbox.empty() and not self.session.busy:
            socket_reclaim.idle(self.ws.scope, lambda: self.inbox.put_nowait(_RECLAIMED), self.owner)

    def _settle_waiting(self) -> None:
        """Give back reservations of waiting creates that no longer wait (started or dropped). Which create left
        the lanes is the session's business: the smallest reservations go first, so what is held never falls
        below what waits."""
        if len(self.waiting_holds) > self.session.waiting:
            self.waiting_holds.sort(key=lambda hold: hold.bytes)
            while len(self.waiting_holds) > self.session.waiting:
                self.waiting_holds.pop(0).release()

    async def execute(self, actions: list[Action]) -> None:
        """Do what the session asked, in order."""
        self._settle_waiting()
        for action in actions:
            if isinstance(action, Send):
                if not self.gone:
                    with contextlib.suppress(OSError, RuntimeError, WebSocketDisconnect):
                        await self.send_text(action.text)
            elif isinstance(action, Start):
                if self.gone:
                    continue  # the socket closed: nothing new starts (what runs is being cancelled)
                task = asyncio.create_task(self.one_response(action), name=f"websocket lane {action.lane!r}")
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            elif isinstance(action, Stop):
                self._steer(action.response_id)
            else:
                await self.local.delete(action.response_id)  # Evict

    def _steer(self, response_id: str) -> None:
        """End a running response for a steer: at once, or once the hosted tool work it runs has finished."""
        svc = self.gw.svc
        running = svc.running.get(response_id)
        if running is not None and running.pipeline.steer_now():
            svc.cancel_running(response_id, STEERED, "The response was steered.")

    async def _close_with(self, error: HTTPError, code: int) -> None:
        """Send ``error`` as the spec's error event, then close with ``code``."""
        with contextlib.suppress(Exception):
            await self.send_text(error_event(error))
            await self.ws.close(code, error.code)

    async def one_response(self, start: Start) -> None:
        """Start one response, send its log, tell the session how it ended. A failure here is this lane's only."""
        try:
            actions = await self._run_response(start)
        except asyncio.CancelledError:
            raise
        except Exception:  # never a traceback to the peer, never another lane's end
            log.exception("websocket response failed")
            actions = self.session.refused(start.ticket, HTTPError(500, "internal_error", "Internal server error."))
        await self.execute(actions)
        self._offer_idle()  # its last response ended: idle until the next message

    async def _start(self, start: Start) -> tuple[ResponseRequest, ResponseRecord, Running]:
        """Parse and start one turn: (request, record, running). What it holds is reserved first and given back
        when the response ends (inputs/request_memory.py)."""
        gw, svc = self.gw, self.gw.svc
        await gw.limit_rate(self.ws, self.owner)
        # Its decoded message (measured) and what is parsed and built from it, reserved before the parse.
        hold = gw.request_memory.reserve(self.owner, held_bytes(start.body, 0))
        try:
            req = parse_request(dict(start.body), server_tool_names=svc.tools.names(), dialect=svc.dialect.name,
                                prewarm=not start.generate, strict_fields=gw.config.strict_fields)
            req.generate = start.generate
            req.affinity = affinity_key(self.ws.headers, req.prompt_cache_key)
            if not gw.gate.try_enter():
                raise HTTPError(503, "too_many_streams", "Too many open streams; retry shortly.")
            try:
                gw.metrics.set_open_streams(gw.gate.open)
                record, running = await svc.start(req, owner=self.owner, local=self.local)
            except BaseException:
                gw.gate.leave()
                gw.metrics.set_open_streams(gw.gate.open)
                raise
        except BaseException:
            hold.release()
            raise
        running.task.add_done_callback(lambda _: hold.release())
        return req, record, running

    async def _run_response(self, start: Start) -> list[Action]:
        gw = self.gw
        svc = gw.svc
        try:
            req, record, running = await self._start(start)
        except HTTPError as exc:
            return self.session.refused(start.ticket, exc)
        except StoreUnavailable as exc:
            return self.session.refused(start.ticket, HTTPError(503, "store_unavailable",
                                                                f"The response store is unavailable: {exc}"))
        rid = record.id
        await self.execute(self.session.started(start.ticket, rid))
        store = running.store if running.store is self.local else backend_of(svc.store, rid)
        sender = WebSocketTurnSender(store=store, response_id=rid, after=-1, dialect=svc.dialect,
                                     keepalive_seconds=gw.config.keepalive_seconds, headers=[])
        sender.writer = self.writer
        sender.prefix = lane_prefix(start.lane)
        try:
            if start.metadata is not None:
                await self.send_text(start.metadata)
            finished = await sender.send_log(self.ws.send, gw.config.slow_reader_timeout_seconds)
            if not finished and not req.background:
                svc.cancel_running(rid, "slow_reader", "The client stopped reading.")
        except asyncio.CancelledError:
            sender.disconnected = True
            if not req.background:
                svc.on_client_gone(rid)
            raise
        except OSError:
            if not req.background:
                svc.on_client_gone(rid)
            self.gone = True
        finally:
            gw.gate.leave()
            gw.metrics.set_open_streams(gw.gate.open)
        final = await store.get(rid)
        if final is None:
            return self.session.finished(start.ticket, Outcome("failed"))
        details = final.response.get("incomplete_details") or {}
        return self.session.finished(start.ticket, Outcome(final.status, details.get("reason"),
                                                           tuple(final.response.get("output") or ())))


async def serve_websocket(gw: _WebSocketGateway, ws: WebSocket) -> None:
    """The ``/v1/responses`` WebSocket endpoint: authenticate the handshake, then run the connection."""
    try:
        if not gw.keys.enabled:  # the open gateway: DNS rebinding and cross-origin pages (web_security.py)
            check_open_websocket(ws.scope.get("scheme", "ws"), dict(ws.scope["headers"]))
        owner = gw.authenticate(ws)
        gw.svc  # noqa: B018 - raises 503 while the server is starting
    except HTTPError as exc:
        await _deny(ws, exc)
        return
    await ws.accept()
    try:
        await _Connection(gw, ws, owner).run()
    except (WebSocketDisconnect, OSError):
        pass
    except Exception:  # never a traceback to the peer: log it, send the spec's error, close
        log.exception("websocket connection failed")
        if ws.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(Exception):
                await ws.send_text(error_event(HTTPError(500, "internal_error", "Internal server error.")))
                await ws.close(1011)
        return
    if ws.application_state == WebSocketState.CONNECTED:
        with contextlib.suppress(Exception):
            await ws.close(1000)


async def _deny(ws: WebSocket, exc: HTTPError) -> None:
    """Refuse the handshake with the HTTP status and error envelope (a 403 close where the server cannot)."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        from respstream.server.http_errors import error_response

        await ws.send_denial_response(error_response(exc))
    else:
        await ws.close(1008, exc.message[:120])
