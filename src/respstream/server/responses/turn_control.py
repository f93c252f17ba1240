"""How a running response can be told to stop short of its natural end, and the response that never generates: the
WebSocket mode's steering (``response.steer``) and prewarm (``generate: false``), as a mixin of the pipeline.

Steering: :meth:`TurnControl.steer_now` says whether the caller may cancel the run at once (the pipeline then ends
it ``incomplete``, reason ``steered``, with the open items closed and what was streamed kept) or whether hosted tool
work is running, which finishes first: the run then stops at the next boundary (:meth:`_stop_if_steered`, after the
tool round or the ground-first step). Every upstream kind goes through here: the cancellation closes the upstream
generator, which closes its HTTP stream (Chat Completions, native Responses, the embedded llama.cpp).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from respstream.server.inputs.truncation import estimate_messages
from respstream.server.routing.classify import estimate_tokens
from respstream.server.upstream.base import Usage

if TYPE_CHECKING:
    from respstream.server.events.writer import ResponseWriter
    from respstream.server.inputs.response_request import ResponseRequest

__all__ = ["STEERED", "TurnControl"]

# The cancel code of a steered response (WebSocket ``response.steer``): it ends ``incomplete`` with this reason.
STEERED = "steered"


class TurnControl:
    """Mixed into :class:`~respstream.server.responses.pipeline.Pipeline` (which sets the attributes below)."""

    writer: ResponseWriter
    request: ResponseRequest
    messages: list[dict[str, Any]]
    cancel_code: str
    _hosted_running: int
    _steer_after_work: bool

    if TYPE_CHECKING:
        def _tool_specs(self) -> list[dict[str, Any]]: ...

    def steer_now(self) -> bool:
        """A steer arrived: True when the caller should cancel the run now; False while hosted tool work runs (it
        finishes first, then the response ends steered at that boundary: :meth:`_stop_if_steered`)."""
        self.cancel_code = STEERED
        if self._hosted_running:
            self._steer_after_work = True
            return False
        return True

    @contextlib.contextmanager
    def _hosted_work(self) -> Iterator[None]:
        self._hosted_running += 1
        try:
            yield
        finally:
            self._hosted_running -= 1

    def _stop_if_steered(self) -> None:
        if self._steer_after_work:
            raise asyncio.CancelledError  # handled in run(): the response ends incomplete, reason steered

    def _prewarm(self) -> None:
        """``generate: false`` (WebSocket prewarm): no upstream call, ``output: []``, the input counted (the
        estimate of :func:`~respstream.server.inputs.truncation.estimate_messages`, tools included) and 0 output
        tokens; the stored response is the context a ``previous_response_id`` continues from."""
        offered = self._tool_specs() if self.request.tool_policy.mode != "none" else []
        tools = sum(estimate_tokens(str(spec)) for spec in [*offered, *self.request.declared_tools])
        self.writer.complete(usage=Usage(input_tokens=estimate_messages(self.messages) + tools, output_tokens=0))
