"""Callbacks on a stream: ``stream.on(type, fn)`` plus a few hooks for what UIs care about.

Handlers run synchronously, in registration order, when the event is delivered (just before the iterator yields
it), so they see events in sequence order with no duplicates. A handler that raises stops the stream: the error
propagates to whoever is iterating. Async streams accept coroutine functions too; their results are awaited.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from respstream.protocol.events import (
    ALIAS_NAMES,
    Event,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    RefusalDelta,
    RewriteInProgress,
    RoutingCompleted,
)

if TYPE_CHECKING:
    from respstream.errors import RespstreamError
    from respstream.protocol.assembler import AssembledResponse

__all__ = ["ALL_EVENTS", "Handlers", "ToolCallUpdate"]

ALL_EVENTS = "*"  # `stream.on("*", fn)` sees every event

# Argument/input deltas of tool-like items, by event type.
_ARGUMENT_DELTAS = frozenset(
    {
        "response.function_call_arguments.delta",
        "response.mcp_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.code_interpreter_call_code.delta",
    }
)


@dataclass
class ToolCallUpdate:
    """One step in the life of a tool call: ``start`` (item added), ``arguments`` (a delta), ``done`` (item done).

    ``arguments`` is everything received so far; ``output`` and ``status`` are set on ``done`` when the server
    ran the tool itself (the seed platform puts them on the ``function_call`` item; OpenAI on hosted-tool items).
    """

    phase: Literal["start", "arguments", "done"]
    item_id: str | None
    item_type: str
    name: str | None
    call_id: str | None
    arguments: str
    delta: str = ""
    status: str | None = None
    output: Any = None
    item: dict[str, Any] = field(default_factory=dict)


Callback = Callable[[Any], Any]


class Handlers:
    """The registry behind ``ResponseStream.on`` and the ``on_*`` hooks. Returns what callbacks return."""

    def __init__(self) -> None:
        self._by_type: dict[str, list[Callback]] = {}
        self._tool: list[Callback] = []
        self._completed: list[Callback] = []
        self._failed: list[Callback] = []
        self._tools: dict[str, ToolCallUpdate] = {}  # item_id (or output_index) -> accumulated call

    def __bool__(self) -> bool:
        return bool(self._by_type or self._tool or self._completed or self._failed)

    def on(self, event_type: str, fn: Callback) -> None:
        """Call ``fn`` for each event of ``event_type``, under any of its wire names (``response.routing.completed``
        also fires for ``respstream:response.routing.completed``, ``response.reasoning_text.delta`` for
        ``response.reasoning.delta``)."""
        for name in (event_type, *ALIAS_NAMES.get(event_type, ())):
            self._by_type.setdefault(name, []).append(fn)

    def on_text(self, fn: Callback) -> None:
        self.on("response.output_text.delta", lambda e: fn(e.delta or "") if isinstance(e, OutputTextDelta) else None)

    def on_refusal(self, fn: Callback) -> None:
        self.on("response.refusal.delta", lambda e: fn(e.delta or "") if isinstance(e, RefusalDelta) else None)

    def on_routing(self, fn: Callback) -> None:
        self.on("response.routing.completed", lambda e: fn(e) if isinstance(e, RoutingCompleted) else None)

    def on_rewrite(self, fn: Callback) -> None:
        self.on("response.rewrite.in_progress", lambda e: fn(e) if isinstance(e, RewriteInProgress) else None)

    def on_tool_call(self, fn: Callback) -> None:
        self._tool.append(fn)

    def on_completed(self, fn: Callback) -> None:
        self._completed.append(fn)

    def on_failed(self, fn: Callback) -> None:
        self._failed.append(fn)

    def dispatch(self, event: Event) -> list[Any]:
        """Run every callback interested in ``event``; return their results (coroutines for the async twin)."""
        results: list[Any] = []
        for fn in self._by_type.get(event.type, ()):
            results.append(fn(event))
        for fn in self._by_type.get(ALL_EVENTS, ()):
            results.append(fn(event))
        if self._tool:
            update = self._tool_update(event)
            if update is not None:
                results.extend(fn(update) for fn in self._tool)
        return results

    def finish(self, response: AssembledResponse, error: RespstreamError | None) -> list[Any]:
        """The stream is over: ``on_completed`` with the response, or ``on_failed`` with the outcome error."""
        if error is None:
            return [fn(response) for fn in self._completed]
        return [fn(error) for fn in self._failed]

    def _tool_update(self, event: Event) -> ToolCallUpdate | None:
        if isinstance(event, OutputItemAdded | OutputItemDone):
            item = event.item or {}
            item_type = str(item.get("type") or "")
            if not item_type.endswith("_call"):
                return None
            key = str(item.get("id") or event.output_index)
            known = self._tools.get(key)
            arguments = item.get("arguments", item.get("input", item.get("code")))
            update = ToolCallUpdate(
                phase="start" if isinstance(event, OutputItemAdded) else "done",
                item_id=item.get("id"),
                item_type=item_type,
                name=item.get("name") or (known.name if known else None),
                call_id=item.get("call_id") or (known.call_id if known else None),
                arguments=arguments if isinstance(arguments, str) and arguments else (known.arguments if known else ""),
                status=item.get("status"),
                output=item.get("output", item.get("outputs", item.get("result"))),
                item=item,
            )
            self._tools[key] = dataclasses.replace(update)  # our accumulator; callbacks keep their copy
            return update
        if event.type in _ARGUMENT_DELTAS:
            item_id = getattr(event, "item_id", None)
            key = str(item_id if item_id is not None else getattr(event, "output_index", None))
            known = self._tools.get(key)
            delta = getattr(event, "delta", None) or ""
            if known is None:  # a delta without its item: still tell the UI, with what we know
                known = ToolCallUpdate("arguments", item_id, "function_call", None, None, "")
            known.arguments += delta
            update = ToolCallUpdate(
                "arguments", known.item_id, known.item_type, known.name, known.call_id, known.arguments, delta,
                known.status, None, known.item,
            )
            self._tools[key] = known
            return update
        return None
