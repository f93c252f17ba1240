"""Running the gateway under uvicorn with a clean stop: :class:`GatewayServer`.

How this works: uvicorn's own shutdown stops accepting, waits (up to ``timeout_graceful_shutdown``) for open
connections, cancels what is left and only then runs the app's lifespan shutdown. For a streaming gateway that order
cuts every open stream without a terminal event. :class:`GatewayServer` puts the app's ``drain`` first: on SIGTERM
or SIGINT it closes the listening sockets (new connections are refused), awaits ``drain`` (the service ends every
foreground response at once with ``error`` ``server_shutdown``, gives background work ``shutdown_grace_seconds`` to
finish, then ends the rest the same way), and then lets uvicorn close the connections, which by now have all seen
their terminal. The process then exits normally (status 0) instead of re-raising the signal.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn

__all__ = ["GatewayServer"]

log = logging.getLogger("respstream.server")


class GatewayServer(uvicorn.Server):
    """A uvicorn server that awaits ``drain()`` after it stops listening and before it closes connections."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._drain = drain

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal after a graceful stop (the process would die of SIGTERM, or raise
        # KeyboardInterrupt): the stop was clean, so forget it and exit 0.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # stop accepting before anything else: a balancer's next try goes elsewhere
        for sock in sockets or []:
            sock.close()
        if not self.force_exit:
            try:
                await self._drain()
            except Exception:  # the connections must still be closed and the lifespan shut down
                log.exception("draining running responses failed")
        await super().shutdown(sockets)
