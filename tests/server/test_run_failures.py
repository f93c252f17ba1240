"""ResponseService._run: a failure while storing is settled inside the generation lease, so readers get the precise
terminal (``internal_error``) rather than a ``worker_lost`` some reader appended once the lease was gone.

The store is a MemoryStore with a SIMULATED lease (a flag) whose first terminal append fails with an unexpected
error (not ``StoreUnavailable``): the writer's whole terminal batch is lost and the service must end the log itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.store.base import Entry
from respstream.server.store.memory import MemoryStore
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import FakeRewriter, FakeRouter, FakeTools, ServerThread, decode


class TerminalFailsOnce(MemoryStore):
    """Memory store without the synchronous append path; the first terminal batch raises RuntimeError."""

    append_nowait = None  # type: ignore[assignment]  # the writer then awaits append() per batch

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.leased = False
        self.failures_left = 1
        self.terminals_under_lease: list[bool] = []

    def hold_lease(self, response_id: str) -> AbstractAsyncContextManager[None]:
        @contextlib.asynccontextmanager
        async def lease() -> AsyncIterator[None]:
            self.leased = True
            try:
                yield
            finally:
                self.leased = False

        return lease()

    async def append(self, response_id: str, entries: Sequence[Entry]) -> None:
        if entries and entries[-1].terminal:
            if self.failures_left:
                self.failures_left -= 1
                raise RuntimeError("disk on fire")
            self.terminals_under_lease.append(self.leased)
        MemoryStore.append_nowait(self, response_id, entries)


@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_lost_terminal_batch_ends_the_log_with_internal_error_under_the_lease(dialect: str) -> None:
    store = TerminalFailsOnce()
    router = FakeRouter({"scripted-a": ScriptedUpstream(5, name="a", models=["scripted-a"])})
    app = create_app(Config(dialect=dialect, upstreams=["scripted:1"]),
                     Components(store=store, router=router, tools=FakeTools(), rewriter=FakeRewriter()))
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=20) as client:
        final = client.post("/v1/responses", json={"input": "hello", "stream": False}).json()
        replay = client.get(f"/v1/responses/{final['id']}", params={"stream": "true"}).content
        again = client.get(f"/v1/responses/{final['id']}").json()
    assert store.terminals_under_lease == [True]
    core = decode(replay, dialect=dialect)
    assert core.violations == []
    assert core.result.error is not None and core.result.error["code"] == "internal_error"
    assert again["status"] == "failed" and again["error"]["code"] == "internal_error"
