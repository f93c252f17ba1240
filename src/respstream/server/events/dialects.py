"""The three wire dialects the gateway speaks: ``platform`` (the EU GPT seed), ``openai`` and ``openresponses``.

How this works: everything that differs between the dialects — ids, the clock unit of timestamps, the SSE ``event:``
and ``id:`` lines, the ``[DONE]`` sentinel, the lifecycle preamble, terminal shapes, event names, how server tools
appear — is answered by one small :class:`Dialect` object. The writer and the SSE framing ask it; nothing else
branches on the dialect name.

``platform``: ``event: message``; UUID ids; every timestamp (``created_at``, ``completed_at``) in milliseconds, as
the seed shows; terminals ``response.completed`` (also for a token-limit stop, with ``status: "incomplete"``) or a
flat ``error`` (``{"type":"error","code","message","param"}``); server tools are ``function_call`` items whose
``output_item.done`` carries ``output`` and ``status``; the seed's own event names (``response.routing.completed``,
``response.rewrite.in_progress``).

``openai``: ``event: <type>``; ``resp_``/``msg_``/``fc_``/``rs_``/``ws_``/``mcp_`` ids; timestamps in seconds;
``response.queued`` (background) and ``response.in_progress`` after ``response.created``; terminals
``response.completed``, ``response.incomplete`` or a nested ``error`` event followed by ``response.failed``; a cancel
is ``response.failed`` with ``status: "cancelled"``; server tools are ``web_search_call`` / ``mcp_call`` items;
reasoning is ``response.reasoning_text.*`` (OpenAI's wire); the platform-only events are ``respstream:``-prefixed.

``openresponses``: the Open Responses spec (2026-04-24): as ``openai`` for ids, clock, preamble and terminals, plus
no ``id:`` lines (resume through ``starting_after``), ``data: [DONE]`` after the terminal, reasoning as
``response.reasoning.delta/done``, and every extension event, item and hosted tool prefixed ``respstream:`` (server
tools are ``respstream:<tool>_call`` items).

When ``stream`` is absent from a request, every dialect answers JSON (the Responses API default: AI SDK
``generateObject`` and litellm send no ``stream`` and ``Accept: */*``); ``platform`` streams only when ``Accept``
names ``text/event-stream`` (a seed-style client that wants the stream says so).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DIALECTS", "DIALECT_NAMES", "EXTENSION_PREFIX", "Dialect", "get_dialect", "uuid4_hex", "uuid4_text"]

# The implementor slug Open Responses asks extensions (events, items, hosted tools) to carry.
EXTENSION_PREFIX = "respstream:"


_VERSION_4 = (0x4000 << 64) | (0x8000 << 48)  # RFC 9562: version 4, variant 10
_VERSION_MASK = ~((0xF000 << 64) | (0xC000 << 48))


def uuid4_hex() -> str:
    """``uuid.uuid4().hex`` without the UUID object (half the cost; ids are made several times a request)."""
    return "%032x" % ((int.from_bytes(os.urandom(16)) & _VERSION_MASK) | _VERSION_4)


def uuid4_text() -> str:
    """``str(uuid.uuid4())`` without the UUID object."""
    x = uuid4_hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    event_line_is_type: bool  # `event: <type>` (openai) instead of `event: message` (platform)
    created_at_ms: bool  # every timestamp of the Response in milliseconds (platform) instead of seconds
    prefixed_ids: bool
    lifecycle_preamble: bool  # response.queued / response.in_progress after response.created
    hosted_tool_items: bool  # web_search_call / mcp_call instead of function_call items for server tools
    separate_terminal_types: bool  # response.incomplete / response.failed exist as terminals
    id_lines: bool = True  # `id: <sequence_number>` on every frame (Open Responses: SHOULD NOT)
    done_sentinel: bool = False  # `data: [DONE]` after the terminal event
    prefix_extensions: bool = False  # platform-only events named `respstream:<name>`
    extension_tool_items: bool = False  # server tools as `respstream:<tool>_call` items (Open Responses)
    reasoning_event: str = "response.reasoning_text"  # `<reasoning_event>.delta` / `.done`
    # The progress event of a quiet response (server/events/progress_events.py); None: keep-alive comments only.
    keepalive_event: str | None = "keepalive"
    # ...sent only after this much quiet (at least; progress_event_seconds otherwise). Open Responses: 240 s, under
    # Codex CLI's 300 s idle timer, which counts events, not comments. The spec allows a prefixed extension event
    # (clients MUST ignore one they do not know) but the public compliance suite's schema refuses it; its cases
    # give up after 30 s, long before the first one.
    keepalive_after_seconds: float = 0.0
    stream_on_accept: bool = False  # a request without `stream` streams when Accept asks for text/event-stream

    def new_id(self, prefix: str) -> str:
        """A fresh id: ``<prefix>_<hex>`` in the openai dialects, a UUID in the platform dialect."""
        if self.prefixed_ids:
            return f"{prefix}_{uuid4_hex()}"
        return uuid4_text()

    def created_at(self, unix_seconds: float) -> int:
        """A Response timestamp (``created_at``, ``completed_at``) in this dialect's unit."""
        return int(unix_seconds * 1000) if self.created_at_ms else int(unix_seconds)

    def event_name(self, event_type: str) -> bytes:
        return event_type.encode() if self.event_line_is_type else b"message"

    def extension(self, event_type: str) -> str:
        """The wire name of a platform-only event (``response.routing.completed``...) in this dialect."""
        return EXTENSION_PREFIX + event_type if self.prefix_extensions else event_type


DIALECTS: dict[str, Dialect] = {
    "platform": Dialect(
        name="platform",
        event_line_is_type=False,
        created_at_ms=True,
        prefixed_ids=False,
        lifecycle_preamble=False,
        hosted_tool_items=False,
        separate_terminal_types=False,
        stream_on_accept=True,
    ),
    "openai": Dialect(
        name="openai",
        event_line_is_type=True,
        created_at_ms=False,
        prefixed_ids=True,
        lifecycle_preamble=True,
        hosted_tool_items=True,
        separate_terminal_types=True,
        prefix_extensions=True,
    ),
    "openresponses": Dialect(
        name="openresponses",
        event_line_is_type=True,
        created_at_ms=False,
        prefixed_ids=True,
        lifecycle_preamble=True,
        hosted_tool_items=False,
        separate_terminal_types=True,
        id_lines=False,
        done_sentinel=True,
        prefix_extensions=True,
        extension_tool_items=True,
        reasoning_event="response.reasoning",
        keepalive_event="respstream:keepalive",
        keepalive_after_seconds=240.0,
    ),
}

DIALECT_NAMES: tuple[str, ...] = tuple(DIALECTS)


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name``. Raises ``ValueError`` naming the known ones."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r} (known: {', '.join(sorted(DIALECTS))})") from None
