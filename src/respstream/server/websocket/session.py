"""One WebSocket connection's session as a state machine: client frames in, actions out (sans-IO: no sockets, no
clocks, no tasks; the transport runs the actions and reports back).

How this works: :meth:`Session.receive` takes each client message; a ``response.create`` joins its lane (the
``stream_id``, None for the default lane). A lane runs its creates FIFO, one at a time; lanes run concurrently, at
most ``max_in_flight`` responses together (further creates wait, their bytes charged to the queue budget). A create
leaves as :class:`Start`; the transport reports :meth:`started` (its ``response.created`` is in the log),
:meth:`refused` (it failed before a response existed) or :meth:`finished` (the log's terminal was sent). Steering
(``response.steer``) of a running response gives :class:`Stop`; when it ends, its successor (the original's settings,
``previous_response_id`` = the original, the steering input) starts first on the same lane. A response that ends
waiting on client tool output keeps the steering input for the lane's next create that continues it (prepended).
``response.processed`` is taken silently; ``response.inject`` is answered (no response here waits for injected
input while active, so only its failures exist). Docs: docs/responses-api.md, "WebSocket mode".
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from respstream.server.http_errors import HTTPError
from respstream.server.websocket import events
from respstream.server.websocket.actions import (
    TERMINAL_STATES,
    Action,
    Evict,
    Outcome,
    Send,
    SessionLimits,
    Start,
    Stop,
)
from respstream.server.websocket.frames import (
    check_stream_id,
    decode_frame,
    pop_generate,
    pop_stream_fields,
    steering_items,
)
from respstream.server.websocket.inject import answer_inject
from respstream.server.websocket.turn_state import TurnStates

__all__ = ["Session"]

# What a create continuing a prewarm of this connection inherits when it does not send its own.
_PREWARMED = ("instructions", "tools", "tool_choice", "parallel_tool_calls")
_KNOWN_TYPES = "'response.create', 'response.steer', 'response.inject' or 'response.processed'"


class QueueBudget(Protocol):
    """The gateway-wide budget of queued message bytes (:class:`~respstream.server.store.byte_budget.ByteBudget`)."""

    def adjust(self, holder: Hashable, n: int) -> None: ...


# -- state ----------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Steer:
    id: str
    target: str
    raw: Any  # the input as sent (returned on failure)
    items: list[dict[str, Any]]


@dataclass(slots=True)
class _Create:
    ticket: int
    lane: str | None
    body: dict[str, Any]
    generate: bool
    size: int  # bytes charged to the queue budget while it waits
    turn_state: str | None = None  # inherited by a steering successor
    steers: list[_Steer] = field(default_factory=list)  # a successor's: what it carries
    response_id: str | None = None


@dataclass(slots=True)
class _Tracked:
    """A response made on this connection: its lane, its state, while running its create and accepted steers."""

    lane: str | None
    state: str = "in_progress"
    create: _Create | None = None
    steers: list[_Steer] = field(default_factory=list)
    required: list[dict[str, Any]] = field(default_factory=list)
    continued: bool = False
    prewarm: dict[str, Any] | None = None  # a prewarm's instructions and tools, for the create continuing it


@dataclass(slots=True)
class _Lane:
    name: str | None
    queue: deque[_Create] = field(default_factory=deque)
    active: _Create | None = None
    queued_bytes: int = 0


class Session:
    """One connection's lanes, queues, steering and turn state. ``budget``/``holder``: where the bytes of waiting
    creates are charged (the transport charged each message when it arrived; the session gives them back once the
    message no longer waits). ``mint``: new opaque ids (steer ids, turn states)."""

    def __init__(self, limits: SessionLimits, *, budget: QueueBudget | None = None, holder: Hashable = None,
                 mint: Callable[[], str] | None = None) -> None:
        self.limits = limits
        self._budget = budget
        self._holder = holder
        self._mint = mint or (lambda: secrets.token_hex(12))
        self._lanes: dict[str | None, _Lane] = {}
        self._named = 0
        self._ready: deque[_Lane] = deque()  # lanes with a waiting create and nothing running, in arrival order
        self._active: dict[int, _Create] = {}
        self._tickets = itertools.count(1)
        self._responses: OrderedDict[str, _Tracked] = OrderedDict()
        self._pending_steers: dict[str, list[_Steer]] = {}  # parent response id -> steers waiting for its create
        self._turns = TurnStates(self._mint, limits.remembered_turns)
        self._sequence = itertools.count()
        self._prewarms: deque[_Tracked] = deque()

    # -- what the transport asks ------------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._active)

    @property
    def waiting(self) -> int:
        """Creates accepted but not started (bounded by the transport's message limits)."""
        return sum(len(lane.queue) for lane in self._lanes.values())

    @property
    def busy(self) -> bool:
        return bool(self._active) or self.waiting > 0

    def lane_of(self, ticket: int) -> str | None:
        return self._active[ticket].lane

    def running_ids(self) -> list[str]:
        return [c.response_id for c in self._active.values() if c.response_id is not None]

    # -- frames in --------------------------------------------------------------------------------------------------
    def receive(self, raw: str | bytes, size: int = 0) -> list[Action]:
        """One client message (``size``: the bytes the transport charged for it)."""
        try:
            body = decode_frame(raw, self.limits.max_body_bytes)
        except HTTPError as exc:
            self._release(size)
            return [Send(events.error_event(exc))]
        kind = body.pop("type", None)
        if kind == "response.create":
            return self._create(body, size)
        self._release(size)
        if kind == "response.steer":
            return self._steer(body)
        if kind == "response.inject":
            return self._inject(body)
        if kind == "response.processed":
            return []  # Codex's fire-and-forget ack: no event at all (an error would fail its next turn)
        if kind is None:
            unknown = HTTPError(400, "missing_required_parameter",
                                f"A WebSocket message needs a type: {_KNOWN_TYPES}.", param="type")
        else:
            unknown = HTTPError(400, "invalid_value",
                                f"Unknown WebSocket message type {repr(kind)[:80]}: expected {_KNOWN_TYPES}.",
                                param="type")
        return [Send(events.error_event(unknown))]

    def _create(self, body: dict[str, Any], size: int) -> list[Action]:
        try:
            name = check_stream_id(body.pop("stream_id", None))
        except HTTPError as exc:  # the spec: no stream_id in this error
            self._release(size)
            return [Send(events.error_event(exc))]
        lane = self._lanes.get(name)
        if lane is None:
            if name is not None and self._named >= self.limits.max_named_streams:
                self._release(size)
                limit = self.limits.max_named_streams
                return [Send(events.error_event(HTTPError(
                    400, "websocket_stream_limit_reached",
                    f"This WebSocket connection has reached its maximum number of distinct stream IDs ({limit}). "
                    "Reuse an existing stream_id or open a new WebSocket connection.", param="stream_id"), name))]
            lane = self._lanes[name] = _Lane(name)
            self._named += name is not None
        try:
            generate = pop_generate(body)
            pop_stream_fields(body)
        except HTTPError as exc:
            self._release(size)
            return [Send(events.error_event(exc, name))]
        if lane.queued_bytes + size > self.limits.max_lane_queued_bytes:
            self._release(size)
            return [Send(events.error_event(HTTPError(
                429, "websocket_stream_queue_full",
                f"Too many bytes of response.create messages wait on this stream (more than "
                f"{self.limits.max_lane_queued_bytes}, websocket_max_queued_bytes_per_stream); send it when one has "
                "finished.", param="stream_id" if name is not None else None), name))]
        create = _Create(next(self._tickets), name, body, generate, size)
        lane.queue.append(create)
        lane.queued_bytes += size
        if lane.active is None and len(lane.queue) == 1:
            self._ready.append(lane)
        return self._pump()

    # -- scheduling -------------------------------------------------------------------------------------------------
    def _pump(self) -> list[Action]:
        actions: list[Action] = []
        while self._ready and len(self._active) < self.limits.max_in_flight:
            lane = self._ready.popleft()
            if lane.active is not None or not lane.queue:
                continue
            create = lane.queue.popleft()
            lane.queued_bytes -= create.size
            self._release(create.size)
            create.size = 0
            lane.active = create
            self._active[create.ticket] = create
            actions.append(self._start(create))
        return actions

    def _start(self, create: _Create) -> Start:
        body = create.body
        parent = body.get("previous_response_id")
        steers = self._pending_steers.pop(parent, None) if isinstance(parent, str) else None
        if steers:  # steering queued while the parent waited on client tool output: first, in submission order
            body["input"] = [item for s in steers for item in s.items] + _as_items(body.get("input"))
            create.steers = steers
        known = self._responses.get(parent) if isinstance(parent, str) else None
        if known is not None:
            known.continued = True
            for key, value in (known.prewarm or {}).items():  # the prewarmed context, unless it sends its own
                body.setdefault(key, value)
        metadata = None
        client_metadata = body.get("client_metadata")
        if isinstance(client_metadata, dict):
            create.turn_state = create.turn_state or self._turns.state_for(client_metadata)
            metadata = events.metadata_event(create.turn_state, client_metadata, create.lane)
        return Start(create.ticket, create.lane, body, create.generate, metadata)

    # -- reports from the transport ---------------------------------------------------------------------------------
    def started(self, ticket: int, response_id: str) -> list[Action]:
        """The response of ``ticket`` exists (its ``response.created`` is in the log)."""
        create = self._active[ticket]
        create.response_id = response_id
        tracked = _Tracked(create.lane, create=create)
        if not create.generate:
            tracked.prewarm = {k: create.body[k] for k in _PREWARMED if k in create.body}
            self._prewarms.append(tracked)
            if len(self._prewarms) > self.limits.remembered_prewarms:
                self._prewarms.popleft().prewarm = None
        self._remember(response_id, tracked)
        return []

    def refused(self, ticket: int, exc: HTTPError) -> list[Action]:
        """The create of ``ticket`` failed before a response existed: its error on its lane, then what waits."""
        create = self._active.pop(ticket)
        lane = self._lanes[create.lane]
        lane.active = None
        actions: list[Action] = [Send(events.error_event(exc, create.lane))]
        actions += self._evict_parent(create)
        for steer in create.steers:
            actions.append(Send(events.steer_failed(
                steer.id, steer.target, steer.raw, "successor_creation_failed",
                f"The steered response's successor could not be created: {exc.message}", next(self._sequence),
                create.lane)))
        return actions + self._next(lane)

    def finished(self, ticket: int, outcome: Outcome) -> list[Action]:
        """The log of ``ticket``'s response ended (its terminal went out)."""
        create = self._active.pop(ticket)
        lane = self._lanes[create.lane]
        lane.active = None
        actions: list[Action] = []
        if outcome.status == "failed":
            actions += self._evict_parent(create)
        rid = create.response_id
        tracked = self._responses.get(rid) if rid is not None else None
        if tracked is not None and rid is not None:
            tracked.state = outcome.status
            tracked.create = None
            tracked.required = outcome.required_input()
            steers, tracked.steers = tracked.steers, []
            if steers:
                actions += self._after_steered(create, rid, outcome, tracked, steers)
        return actions + self._next(lane)

    def _after_steered(self, create: _Create, rid: str, outcome: Outcome, tracked: _Tracked,
                       steers: list[_Steer]) -> list[Action]:
        if tracked.required:  # it stopped for client tool output: the steering waits for the create answering it
            self._pending_steers.setdefault(rid, []).extend(steers)
            return [Send(events.steer_pending(s.id, rid, tracked.required, next(self._sequence), create.lane))
                    for s in steers]
        if outcome.status in ("completed", "incomplete"):  # steered (or it finished first): the successor
            body = {k: v for k, v in create.body.items() if k not in ("input", "previous_response_id")}
            body["previous_response_id"] = rid
            body["input"] = [item for s in steers for item in s.items]
            successor = _Create(next(self._tickets), create.lane, body, True, 0, create.turn_state, steers)
            lane = self._lanes[create.lane]
            lane.queue.appendleft(successor)
            return []
        return [Send(events.steer_failed(s.id, rid, s.raw, "response_not_active",
                                         f"The response ended {outcome.status} before the steering was applied.",
                                         next(self._sequence), create.lane)) for s in steers]

    def _next(self, lane: _Lane) -> list[Action]:
        if lane.queue:
            if lane.queue[0].steers:
                self._ready.appendleft(lane)  # a steering successor starts before anything else waiting
            else:
                self._ready.append(lane)
        return self._pump()

    def _evict_parent(self, create: _Create) -> list[Action]:
        """A continuation that failed evicts its parent from the connection's store, unless it was a fork from
        another lane (the parent is that lane's, which goes on from it)."""
        parent = create.body.get("previous_response_id")
        if not isinstance(parent, str) or not parent:
            return []
        known = self._responses.get(parent)
        if known is not None and known.lane != create.lane:
            return []
        return [Evict(parent)]

    def _remember(self, rid: str, tracked: _Tracked) -> None:
        self._responses[rid] = tracked
        if len(self._responses) > self.limits.remembered_responses:
            for old, t in list(self._responses.items()):
                if len(self._responses) <= self.limits.remembered_responses:
                    break
                if t.state in TERMINAL_STATES:
                    del self._responses[old]
                    self._pending_steers.pop(old, None)

    def _release(self, size: int) -> None:
        if size and self._budget is not None:
            self._budget.adjust(self._holder, -size)

    # -- steering ---------------------------------------------------------------------------------------------------
    def _steer(self, body: dict[str, Any]) -> list[Action]:
        target = body.get("previous_response_id")
        raw = body.get("input")
        tracked = self._responses.get(target) if isinstance(target, str) else None
        lane = tracked.lane if tracked is not None else None

        def failed(code: str, message: str, steer_id: str | None = None) -> list[Action]:
            return [Send(events.steer_failed(steer_id, target, raw, code, message, next(self._sequence), lane))]

        extra = sorted(set(body) - {"previous_response_id", "input"})
        if extra:
            return failed("invalid_input", f"response.steer takes only type, previous_response_id and input, not "
                                           f"{', '.join(map(repr, extra))[:200]}.")
        if not isinstance(target, str) or not target:
            return failed("invalid_input", "previous_response_id (the id from the target's response.created) is "
                                           "required.")
        try:
            items = steering_items(raw)
        except ValueError as exc:
            return failed("invalid_input", str(exc))
        if tracked is None:
            return failed("response_not_found", f"No response with id {target!r} on this connection.")
        if tracked.state == "in_progress":
            create = tracked.create
            if create is not None and (create.body.get("conversation") or create.body.get("conversation_id")):
                return failed("steering_not_supported", "A response bound to a conversation cannot be steered.")
            if create is not None and create.body.get("context_management"):
                return failed("steering_not_supported", "A response using automatic compaction (context_management) "
                                                        "cannot be steered.")
            if len(tracked.steers) >= self.limits.max_pending_steers:
                return failed("too_many_pending_steers",
                              f"{self.limits.max_pending_steers} steers already wait for this response.")
            steer = _Steer(f"steer_{self._mint()}", target, raw, items)
            tracked.steers.append(steer)
            actions: list[Action] = [Send(events.steer_accepted(steer.id, target, next(self._sequence), lane))]
            if len(tracked.steers) == 1:
                actions.append(Stop(target))
            return actions
        if tracked.required and not tracked.continued:  # it waits for client tool output: queued until then
            steer = _Steer(f"steer_{self._mint()}", target, raw, items)
            self._pending_steers.setdefault(target, []).append(steer)
            return [Send(events.steer_accepted(steer.id, target, next(self._sequence), lane)),
                    Send(events.steer_pending(steer.id, target, tracked.required, next(self._sequence), lane))]
        if tracked.state == "completed":
            return failed("response_already_completed", f"Response {target!r} has already completed.")
        return failed("response_not_active", f"Response {target!r} is not active (it ended {tracked.state}).")

    # -- inject (multi-agent beta) ----------------------------------------------------------------------------------
    def _inject(self, body: dict[str, Any]) -> list[Action]:
        return answer_inject(body, self._responses.get, self._sequence)


def _as_items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else [value]
