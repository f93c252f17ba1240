"""WebSocket mode of ``/v1/responses`` (Open Responses 2026-04-24, "WebSocket Transport"): a transport beside SSE.

How this works: the client upgrades ``GET /v1/responses`` (``Authorization: Bearer`` at the handshake, checked like
any HTTP request; a refused handshake gets the usual 401 JSON envelope as its HTTP answer; without API keys the
handshake's Host and Origin are checked first, as for HTTP: 403 ``host_not_allowed`` / ``cross_origin_request``)
and sends ``{"type": "response.create", ...rest of a create body}`` messages. Each one is validated by the same
``parse_request`` and started by the same ``ResponseService.start`` as ``POST /v1/responses``; its event log is sent
by :class:`WebSocketTurnSender`, the SSE sender (``sse_response.EventStreamResponse``: cursor over the store, the
keep-alive/slow-reader timer, the reader's own terminal) with the wire encoding swapped: one text message per event,
the event's JSON exactly as the dialect wrote it for SSE.

One connection runs one response at a time: messages that arrive meanwhile wait in a bounded queue
(``websocket_max_queued_messages``) and are answered in order. ``store: false`` responses are written to the
connection's own :class:`MemoryStore` only (``websocket_cache_responses`` of them), so ``previous_response_id``
continues them on this socket and nowhere else; a turn that fails (4xx/5xx, or a ``failed`` response) evicts the
response it continued. What every connection holds is bounded across connections too (websocket_limits.py): the
bytes of those responses per API key and in total, the bytes of queued messages per connection and in total; an
idle or too old connection is closed, and one whose key was revoked ends at its next ``response.create``.
Errors that are not part of a response are the spec's ``WebSocketErrorEvent``:
``{"type": "error", "status": 400, "error": {"type", "code", "message", "param"}}``. Closing the socket mid-response
cancels a foreground response (as an HTTP disconnect does); a ``background: true`` one runs on and stays retrievable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from respstream.server.endpoints.gateway import Gateway
from respstream.server.events.frames import reader_terminal_data
from respstream.server.http import socket_reclaim
from respstream.server.http.sse_response import COALESCE_BYTES, EventStreamResponse
from respstream.server.http.web_security import check_open_websocket
from respstream.server.http.websocket_limits import (
    WebSocketBudgets,
    age_error,
    message_bytes,
    revoked_error,
    wait_limit,
)
from respstream.server.http.websocket_writes import FrameWriter
from respstream.server.http_errors import HTTPError, envelope
from respstream.server.inputs.requests import parse_request
from respstream.server.routing.affinity import affinity_key
from respstream.server.store.base import Entry, StoreUnavailable
from respstream.server.store.memory_budgeted import BudgetedMemoryStore
from respstream.server.store.split import backend_of

if TYPE_CHECKING:
    from respstream.server.http.auth import KeyStore
    from respstream.server.http.limits import StreamGate
    from respstream.server.telemetry.metrics import Metrics

__all__ = ["WebSocketTurnSender", "error_event", "serve_websocket"]

log = logging.getLogger("respstream.server")

# Fields of a create body that belong to HTTP/SSE: the spec says a WebSocket client MUST NOT send them.


def _socket_stream_fields(body: dict[str, Any]) -> None:
    """Every response on the socket streams: ``"stream": true`` (the Agents SDKs, Python 0.24 / JS 0.20, send it)
    and ``stream_options`` (checked with the other fields) are taken and ignored; ``"stream": false`` asks for
    something the socket cannot do, so it is refused naming the field."""
    stream = body.pop("stream", None)
    if stream is None or stream is True:
        return
    if stream is False:
        raise HTTPError(400, "unsupported_parameter", "stream: false is not possible on a WebSocket (every response "
                        "on the socket streams); send true or leave it out.", param="stream")
    raise HTTPError(400, "invalid_type", "stream must be a boolean", param="stream")
_CLOSED = object()  # queued by the reader when the peer went away
_RECLAIMED = object()  # queued when the connection guard needs this idle socket's slot (socket_reclaim.py)
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


def error_event(exc: HTTPError) -> str:
    """The spec's ``WebSocketErrorEvent`` for an error that is not part of a response's log."""
    body = envelope(exc.status, exc.code, exc.message, exc.param, **exc.extra)
    return msgspec.json.encode({"type": "error", "status": exc.status, "error": body["error"]}).decode()


class WebSocketTurnSender(EventStreamResponse):
    """The SSE sender's log follower, writing WebSocket text messages instead of SSE frames. ``writer``: the
    connection's :class:`FrameWriter` (None: every message through ``send``), which writes the entries of one read
    of the log together while the connection takes writes at once."""

    writer: FrameWriter | None = None

    async def _send_entries(self, send: Any, entries: list[Entry]) -> bool:
        if self.writer is not None:
            done = self.writer.write(entries, COALESCE_BYTES)
            if done:
                self.last = entries[done - 1].sequence_number
                if done == len(entries):
                    return entries[-1].terminal
                entries = entries[done:]
        return await super()._send_entries(send, entries)

    def abort_connection(self, send: Any) -> bool:
        # ``send`` is Starlette's WebSocket.send, which holds no transport: the writer's connection does.
        if self.writer is not None:
            self.writer.abort()
            return True
        return super().abort_connection(send)

    def entry_message(self, entry: Entry) -> dict[str, Any]:
        return {"type": "websocket.send", "text": entry.data.decode()}

    def keepalive_message(self) -> dict[str, Any] | None:
        return None  # the server pings (uvicorn's ws_ping_interval); an idle socket needs no comment frames

    def terminal_message(self, sequence_number: int, code: str, message: str) -> dict[str, Any]:
        return {"type": "websocket.send", "text": reader_terminal_data(self.dialect, sequence_number, code,
                                                                        message).decode()}

    def close_message(self) -> dict[str, Any]:
        return {"type": "websocket.close", "code": 1008, "reason": "slow reader"}

    async def send_log(self, send: Callable[[dict[str, Any]], Any], limit: float) -> bool:
        """Send the log to its terminal. False when this reader was cut for not reading (the socket is closed)."""
        me = asyncio.current_task()
        self.arm_timer(limit)
        try:
            await self._follow(send)
            return True
        except asyncio.CancelledError:
            if not self.cut_slow or self.disconnected:
                raise
            if me is not None:
                me.uncancel()
            self.disarm_timer()
            await self._cut(send, limit)
            return False
        finally:
            self.disarm_timer()


class _Connection:
    """One WebSocket: its queue of messages, its own store, its turns."""

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
        self.queued = budgets.queued  # bytes of the messages in `queue`, charged to this connection
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.opened = time.monotonic()
        self.turn: asyncio.Task[None] | None = None
        self.gone = False
        self.writer = FrameWriter.for_send(ws.scope.get("state", {}).get("raw_send"))

    async def send_text(self, text: str) -> None:
        await self.ws.send({"type": "websocket.send", "text": text})

    async def read_loop(self) -> None:
        """Read every message into the queue (bounded); the peer going away cancels a running turn."""
        limit = self.gw.config.websocket_max_queued_messages
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                data = text if text is not None else message.get("bytes") or b""
                refused = "count" if self.queue.qsize() >= limit else self.queued.take(self, message_bytes(data))
                if refused is not None:
                    with contextlib.suppress(Exception):
                        await self.ws.close(*_QUEUE_FULL[refused])
                    break
                self.queue.put_nowait(data)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self.gone = True
            if self.turn is not None and not self.turn.done():
                self.turn.cancel()
            self.queue.put_nowait(_CLOSED)

    async def run(self) -> None:
        reader = asyncio.create_task(self.read_loop())
        try:
            while True:
                wait, expired = wait_limit(self.gw.config, time.monotonic() - self.opened)
                if self.queue.empty():  # idle: the connection guard may reclaim it under pressure
                    socket_reclaim.idle(self.ws.scope, lambda: self.queue.put_nowait(_RECLAIMED), self.owner)
                try:
                    async with asyncio.timeout(wait):
                        raw = await self.queue.get()
                except TimeoutError:  # idle too long, or too old while idle: close it, saying why
                    await self._close_with(expired, 1000)
                    return
                finally:
                    socket_reclaim.busy(self.ws.scope)
                if raw is _RECLAIMED:
                    await self._close_with(socket_reclaim.reclaimed_error(), socket_reclaim.RECLAIM_CODE)
                    return
                if raw is _CLOSED or self.gone:
                    return
                self.queued.adjust(self, -message_bytes(raw))
                if time.monotonic() - self.opened > self.gw.config.websocket_max_connection_seconds:
                    await self._close_with(age_error(self.gw.config), 1000)
                    return
                if self.owner is not None and not self.gw.keys.active(self.owner):
                    await self._close_with(revoked_error(), 1008)  # revoked while the socket was open
                    return
                self.turn = asyncio.create_task(self.one_turn(raw))
                try:
                    await self.turn
                except asyncio.CancelledError:
                    if not self.gone:
                        raise
                    return
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            self.queued.adjust(self, -self.queued.held(self))  # what is still queued is dropped with the socket
            await self.local.aclose()

    async def _close_with(self, error: HTTPError, code: int) -> None:
        """Send ``error`` as the spec's error event, then close with ``code``."""
        with contextlib.suppress(Exception):
            await self.send_text(error_event(error))
            await self.ws.close(code, error.code)

    async def one_turn(self, raw: str | bytes) -> None:
        gw = self.gw
        previous: str | None = None
        try:
            body = _decode(raw, gw.config.max_body_bytes)
            previous = body.get("previous_response_id") if isinstance(body.get("previous_response_id"), str) else None
            kind = body.pop("type", None)
            if kind != "response.create":
                raise HTTPError(400, "invalid_value" if kind is not None else "missing_required_parameter",
                                f"A WebSocket message must have type 'response.create', not {kind!r}.", param="type")
            _socket_stream_fields(body)
            await gw.limit_rate(self.ws, self.owner)
            svc = gw.svc
            req = parse_request(body, server_tool_names=svc.tools.names())
            del body  # the decoded JSON is not kept for the turn (30,000 items: ~9 MB of objects; issue 42 H4v)
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
        except HTTPError as exc:
            await self._failed_turn(previous)
            await self.send_text(error_event(exc))
            return
        except StoreUnavailable as exc:
            await self._failed_turn(previous)
            await self.send_text(error_event(HTTPError(503, "store_unavailable",
                                                       f"The response store is unavailable: {exc}")))
            return
        rid = record.id
        store = running.store if running.store is self.local else backend_of(svc.store, rid)
        sender = WebSocketTurnSender(store=store, response_id=rid, after=-1, dialect=svc.dialect,
                                     keepalive_seconds=gw.config.keepalive_seconds, headers=[])
        sender.writer = self.writer
        try:
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
        if final is not None and final.status == "failed":
            await self._failed_turn(previous)

    async def _failed_turn(self, previous: str | None) -> None:
        """The spec: a continuation turn that fails evicts the response it continued from this socket's cache."""
        if previous:
            await self.local.delete(previous)


def _decode(raw: str | bytes, limit: int) -> dict[str, Any]:
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > limit:
        raise HTTPError(413, "request_too_large", f"The message is larger than {limit} bytes (max_body_bytes).")
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise HTTPError(400, "invalid_json", f"The message is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise HTTPError(400, "invalid_json", f"The message is not valid UTF-8 (at byte {exc.start}).") from None
    except RecursionError:
        raise HTTPError(400, "invalid_json", "The message nests arrays/objects too deeply.") from None
    if not isinstance(body, dict):
        raise HTTPError(400, "invalid_json", "A WebSocket message must be a JSON object.")
    return body


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
