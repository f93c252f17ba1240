"""``Client.connect()``: one WebSocket to ``/v1/responses``, many sequential responses (see :mod:`ws_core`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from respstream.client.core import ClientConfig
from respstream.client.errors import APIConnectionError, status_error
from respstream.client.ws_core import TurnReader, create_message, handshake_headers, websocket_url
from respstream.errors import StreamTimeout, StreamTruncated
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

__all__ = ["WebSocketConnection"]


class WebSocketConnection:
    """``stream(**request)`` yields one response's events; ``create(**request)`` returns it assembled.

    ``previous_response_id`` continues any response of this socket, ``store: false`` ones included (those live only
    on this socket on the gateway). One response at a time, as the spec requires."""

    def __init__(self, config: ClientConfig) -> None:
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        self.config = config
        url = websocket_url(config)
        try:
            self._ws = connect(url, additional_headers=handshake_headers(config), open_timeout=config.timeout,
                               max_size=config.max_event_size + 4096)
        except InvalidStatus as exc:
            response = exc.response
            body = bytes(response.body or b"")
            raise status_error(response.status_code, dict(response.headers), body, url=url) from None
        except (OSError, WebSocketException, TimeoutError) as exc:
            raise APIConnectionError(f"cannot open a WebSocket to {url}: {exc}") from exc

    def stream(self, **request: Any) -> Iterator[Event]:
        from websockets.exceptions import ConnectionClosed

        self._ws.send(create_message(request))
        reader = TurnReader(self.config)
        self.last = reader
        while not reader.done:
            try:
                message = self._ws.recv(timeout=self.config.idle_timeout)
            except TimeoutError:
                raise StreamTimeout(f"no WebSocket message for {self.config.idle_timeout:g} s",
                                    partial=reader.core.result,
                                    last_sequence_number=reader.core.last_sequence_number) from None
            except ConnectionClosed as exc:
                raise StreamTruncated(f"the WebSocket closed before the response ended ({exc})",
                                      partial=reader.core.result,
                                      last_sequence_number=reader.core.last_sequence_number) from None
            yield from reader.feed(message)

    def create(self, **request: Any) -> AssembledResponse:
        for _ in self.stream(**request):
            pass
        return self.last.result()

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> WebSocketConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
