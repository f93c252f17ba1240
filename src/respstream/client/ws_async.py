"""``AsyncClient.connect()``: the asyncio twin of :mod:`ws_sync` (same :mod:`ws_core`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from respstream.client.core import ClientConfig
from respstream.client.errors import APIConnectionError, status_error
from respstream.client.ws_core import TurnReader, create_message, handshake_headers, websocket_url
from respstream.errors import StreamTimeout, StreamTruncated
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

__all__ = ["AsyncWebSocketConnection"]


class AsyncWebSocketConnection:
    """``async with client.connect() as conn``: ``conn.stream(**request)`` / ``await conn.create(**request)``."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._ws: Any = None

    async def open(self) -> AsyncWebSocketConnection:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus, WebSocketException

        url = websocket_url(self.config)
        try:
            self._ws = await connect(url, additional_headers=handshake_headers(self.config),
                                     open_timeout=self.config.timeout, max_size=self.config.max_event_size + 4096)
        except InvalidStatus as exc:
            response = exc.response
            body = bytes(response.body or b"")
            raise status_error(response.status_code, dict(response.headers), body, url=url) from None
        except (OSError, WebSocketException, TimeoutError) as exc:
            raise APIConnectionError(f"cannot open a WebSocket to {url}: {exc}") from exc
        return self

    async def stream(self, **request: Any) -> AsyncIterator[Event]:
        from websockets.exceptions import ConnectionClosed

        await self._ws.send(create_message(request))
        reader = TurnReader(self.config)
        self.last = reader
        while not reader.done:
            try:
                async with asyncio.timeout(self.config.idle_timeout):
                    message = await self._ws.recv()
            except TimeoutError:
                raise StreamTimeout(f"no WebSocket message for {self.config.idle_timeout:g} s",
                                    partial=reader.core.result,
                                    last_sequence_number=reader.core.last_sequence_number) from None
            except ConnectionClosed as exc:
                raise StreamTruncated(f"the WebSocket closed before the response ended ({exc})",
                                      partial=reader.core.result,
                                      last_sequence_number=reader.core.last_sequence_number) from None
            for event in reader.feed(message):
                yield event

    async def create(self, **request: Any) -> AssembledResponse:
        async for _ in self.stream(**request):
            pass
        return self.last.result()

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._ws.close()

    async def __aenter__(self) -> AsyncWebSocketConnection:
        return await self.open() if self._ws is None else self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
