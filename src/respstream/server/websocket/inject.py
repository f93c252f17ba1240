"""The answers to a ``response.inject`` frame (the multi-agent beta), decided from what the session tracks.

Why a module of its own: only the failure paths exist here. Inject commits input into a response that stays active
while it waits on client-owned tool output; in this gateway a client tool call ends the response instead, so no
running response can take injected input, and the documented failures are all there is to answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from respstream.server.http_errors import HTTPError
from respstream.server.websocket import events
from respstream.server.websocket.actions import TERMINAL_STATES, Action, Send

__all__ = ["answer_inject"]


class Tracked(Protocol):
    """What the session knows of one of its responses."""

    state: str
    lane: str | None


def answer_inject(body: dict[str, Any], find: Callable[[str], Tracked | None],
                  sequence: Iterator[int]) -> list[Action]:
    """The session's actions for a ``response.inject`` ``body``: an error event for a malformed frame, else
    ``response.inject.failed`` with the documented code."""
    rid = body.get("response_id")
    raw = body.get("input")
    if not isinstance(rid, str) or not rid:
        return [Send(events.error_event(HTTPError(400, "missing_required_parameter",
                                                  "response.inject needs response_id.", param="response_id")))]
    if not isinstance(raw, list):
        return [Send(events.error_event(HTTPError(400, "invalid_type", "response.inject input must be an array "
                                                  "of items.", param="input")))]
    tracked = find(rid)
    if tracked is None:
        return [Send(events.inject_failed(rid, raw, "response_not_found",
                                          f"No response with id {rid!r} on this connection.", next(sequence), None))]
    if tracked.state in TERMINAL_STATES:
        return [Send(events.inject_failed(rid, raw, "response_already_completed",
                                          f"Response {rid!r} has already ended ({tracked.state}).",
                                          next(sequence), tracked.lane))]
    # Running, but nothing here waits for injected input while it stays active: nothing can be committed into it.
    return [Send(events.inject_failed(rid, raw, "response_not_waiting",
                                      f"Response {rid!r} is not waiting for client-owned tool output; "
                                      "send the outputs in a response.create continuing it once it ends.",
                                      next(sequence), tracked.lane))]
