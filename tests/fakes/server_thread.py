"""A real uvicorn server for an ASGI app on 127.0.0.1:<random port>, in a daemon thread (a context manager).

Shared by every test folder that serves an app in-process: the gateway, the playground's fake, the conformance fakes.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

__all__ = ["ServerThread"]


class ServerThread:
    """``url`` is ``http://127.0.0.1:<port>``; ``base_url`` adds ``/v1``. Raises RuntimeError if it does not start."""

    def __init__(self, app: Any, *, lifespan: str = "auto", start_timeout: float = 30.0, ws: str = "none",
                 http: Any = "auto", loop: str = "auto") -> None:
        """``ws``: uvicorn's WebSocket implementation ("websockets-sansio" to test WebSocket mode); ``http``: its
        HTTP implementation ("h11", "httptools" or a protocol class); ``loop``: uvicorn's event loop ("asyncio"
        resolves names through ``socket.getaddrinfo``, so a test can hook DNS)."""
        self.start_timeout = start_timeout
        # Bind before starting so the port is ours from the first moment (no race with another test's server).
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", lifespan=lifespan, ws=ws, http=http, loop=loop, access_log=False,
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
