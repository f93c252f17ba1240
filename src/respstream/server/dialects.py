"""The two wire dialects the gateway speaks: ``platform`` (the EU GPT seed) and ``openai``.

How this works: everything that differs between the dialects — ids, the clock unit of ``created_at``, the SSE
``event:`` line, the lifecycle preamble, terminal shapes, how server tools appear — is answered by one small
:class:`Dialect` object. The writer asks it; nothing else branches on the dialect name.

``platform``: ``event: message``; UUID ids; ``created_at`` in ms; terminals ``response.completed`` (also for a
token-limit stop, with ``status: "incomplete"``) or a flat ``error`` (``{"type":"error","code","message","param"}``);
server tools are ``function_call`` items whose ``output_item.done`` carries ``output`` and ``status``.

``openai``: ``event: <type>``; ``resp_``/``msg_``/``fc_``/``rs_``/``ws_``/``mcp_`` ids; ``created_at`` in seconds;
``response.queued`` (background) and ``response.in_progress`` after ``response.created``; terminals
``response.completed``, ``response.incomplete`` or a nested ``error`` event followed by ``response.failed``; a cancel
is ``response.failed`` with ``status: "cancelled"``; server tools are ``web_search_call`` / ``mcp_call`` items.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["DIALECTS", "Dialect", "get_dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    event_line_is_type: bool  # `event: <type>` (openai) instead of `event: message` (platform)
    created_at_ms: bool
    prefixed_ids: bool
    lifecycle_preamble: bool  # response.queued / response.in_progress after response.created
    hosted_tool_items: bool  # web_search_call / mcp_call instead of function_call items for server tools
    separate_terminal_types: bool  # response.incomplete / response.failed exist as terminals

    def new_id(self, prefix: str) -> str:
        """A fresh id: ``<prefix>_<hex>`` in the openai dialect, a UUID in the platform dialect."""
        if self.prefixed_ids:
            return f"{prefix}_{uuid.uuid4().hex}"
        return str(uuid.uuid4())

    def created_at(self, unix_seconds: float) -> int:
        return int(unix_seconds * 1000) if self.created_at_ms else int(unix_seconds)

    def event_name(self, event_type: str) -> bytes:
        return event_type.encode() if self.event_line_is_type else b"message"


DIALECTS: dict[str, Dialect] = {
    "platform": Dialect(
        name="platform",
        event_line_is_type=False,
        created_at_ms=True,
        prefixed_ids=False,
        lifecycle_preamble=False,
        hosted_tool_items=False,
        separate_terminal_types=False,
    ),
    "openai": Dialect(
        name="openai",
        event_line_is_type=True,
        created_at_ms=False,
        prefixed_ids=True,
        lifecycle_preamble=True,
        hosted_tool_items=True,
        separate_terminal_types=True,
    ),
}


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name``. Raises ``ValueError`` naming the known ones."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r} (known: {', '.join(sorted(DIALECTS))})") from None
