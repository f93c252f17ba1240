"""What the sync and async response streams share beyond the driver: handler registration and the read-only view.

Both twins hold a :class:`~respstream.client.core.StreamDriver` and a stored failure; everything here reads them and
never does IO, so it lives once, in a base class of ``ResponseStream`` and ``AsyncResponseStream``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from respstream.client.core import StreamDriver
from respstream.client.handlers import Handlers
from respstream.errors import RespstreamError
from respstream.protocol.assembler import AssembledResponse

__all__ = ["StreamView"]


class StreamView:
    _driver: StreamDriver
    _failure: BaseException | None
    _handlers: Handlers

    # --- handlers ---------------------------------------------------------------------------------------------

    def on(self, event_type: str, fn: Callable[[Any], Any]) -> Self:
        """Call ``fn(event)`` for every event of ``event_type`` (``"*"``: all); the async stream awaits an awaitable."""
        self._handlers.on(event_type, fn)
        return self

    def on_text(self, fn: Callable[[str], Any]) -> Self:
        """``fn(delta)`` for each output text delta."""
        self._handlers.on_text(fn)
        return self

    def on_tool_call(self, fn: Callable[[Any], Any]) -> Self:
        """``fn(ToolCallUpdate)`` when a tool call starts, gets an arguments delta, and is done."""
        self._handlers.on_tool_call(fn)
        return self

    def on_refusal(self, fn: Callable[[str], Any]) -> Self:
        self._handlers.on_refusal(fn)
        return self

    def on_routing(self, fn: Callable[[Any], Any]) -> Self:
        """``fn(RoutingCompleted)``: the gateway picked a model for ``model: "auto"``."""
        self._handlers.on_routing(fn)
        return self

    def on_rewrite(self, fn: Callable[[Any], Any]) -> Self:
        """``fn(RewriteInProgress)``: the text already streamed is about to be replaced by the ``*.done`` text."""
        self._handlers.on_rewrite(fn)
        return self

    def on_completed(self, fn: Callable[[AssembledResponse], Any]) -> Self:
        self._handlers.on_completed(fn)
        return self

    def on_failed(self, fn: Callable[[RespstreamError], Any]) -> Self:
        """``fn(error)`` with the exception :meth:`result` raises (failed, incomplete, error, cancelled, truncated)."""
        self._handlers.on_failed(fn)
        return self

    @property
    def response_id(self) -> str | None:
        return self._driver.response_id

    @property
    def last_sequence_number(self) -> int | None:
        """The highest contiguous sequence number delivered so far (the resume cursor)."""
        return self._driver.cursor

    @property
    def resumes(self) -> int:
        """How many times this stream reconnected."""
        return self._driver.resumes

    def snapshot(self) -> AssembledResponse:
        """The response as assembled so far (``status`` stays ``truncated`` until a terminal arrives)."""
        return self._driver.result_now()

    def _outcome(self) -> AssembledResponse:
        """The end of ``result()`` once the stream is consumed or closed: the stored failure raised, or the outcome."""
        if self._failure is not None:
            raise self._failure
        if not self._driver.finished:
            self._driver.finish()  # closed early: whatever arrived is the outcome
        return self._driver.outcome()
