"""What an endpoint handler needs of the gateway: :class:`Gateway`, a Protocol the app's ``AppGateway`` satisfies.

Why a Protocol: the handlers here (and the WebSocket mode) used to import the gateway class from the app, which imports
them to mount their routes: an import circle. They take this interface instead; the app, one layer up, passes itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection, Request

    from respstream.server.config import Config
    from respstream.server.responses.responses_service import ResponseService
    from respstream.server.store.base import ResponseRecord

__all__ = ["Gateway"]


class Gateway(Protocol):
    config: Config

    @property
    def svc(self) -> ResponseService:
        """The running service (a 503 ``starting`` before the lifespan has built it)."""
        ...

    def authenticate(self, request: HTTPConnection) -> str | None:
        """The caller's owner id, or None on an open server. Raises 401/429."""
        ...

    async def limit_rate(self, request: HTTPConnection, owner: str | None) -> None:
        """Raises 429 when ``owner`` (or the peer address) is over its rate."""
        ...

    async def read_json(self, request: Request) -> Any:
        """The JSON body, within the body limit. Raises 400/413/415."""
        ...

    async def _record(self, request: Request) -> ResponseRecord:
        """The caller's stored response named by the path's ``response_id`` (404 otherwise), after auth and rate."""
        ...
