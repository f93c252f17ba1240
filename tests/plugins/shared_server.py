"""One server process for every registration of a session fixture: a plugin's fixture may be registered twice (the
top conftest's ``pytest_plugins`` and a folder's conftest importing it), and both must share one server, started by
the first user and stopped when the last one is done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

__all__ = ["SharedServer"]


class _Server(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


ServerT = TypeVar("ServerT", bound=_Server)


class SharedServer(Generic[ServerT]):
    """``use()``: the one running server (``make()``, started on the first use), stopped when no use is left."""

    def __init__(self, make: Callable[[], ServerT]) -> None:
        self._make = make
        self._server: ServerT | None = None
        self._users = 0

    @contextmanager
    def use(self) -> Iterator[ServerT]:
        if self._server is None:
            server = self._make()
            server.start()
            self._server = server
        self._users += 1
        try:
            yield self._server
        finally:
            self._users -= 1
            if self._users == 0:
                server, self._server = self._server, None
                server.stop()
