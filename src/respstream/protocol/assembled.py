"""The assembled outcome of one stream (DESIGN §3 ``replay --json`` object) and helpers that read output items.

:class:`AssembledResponse` is what :meth:`respstream.protocol.assembler.Assembler.result` returns; ``to_json()`` is
exactly the ``replay --json`` object. :func:`output_texts` and :func:`tool_call_summary` read Responses API output
items (assembled or from a terminal response) and are shared by the assembler and the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from respstream.protocol.sequencer import Violation

__all__ = ["OUTCOMES", "AssembledResponse", "JSONObject", "output_texts", "tool_call_summary"]

JSONObject = dict[str, Any]
OUTCOMES: Final = ("completed", "incomplete", "failed", "error", "cancelled", "truncated")


@dataclass(slots=True)
class AssembledResponse:
    """The assembled outcome of one stream; ``to_json()`` is exactly the ``replay --json`` object (DESIGN §3).

    ``status`` is one of :data:`OUTCOMES`; before a terminal event arrives it is ``"truncated"``.
    """

    status: str
    response_id: str | None
    model: str | None
    output_text: str
    streamed_text: str
    refusal: str | None
    output: list[JSONObject]
    tool_calls: list[JSONObject]
    usage: JSONObject | None
    incomplete_details: JSONObject | None
    error: JSONObject | None
    events: int
    last_sequence_number: int | None
    violations: list[Violation] = field(default_factory=list)
    terminal_event: str | None = None
    routing: JSONObject | None = None
    rewritten: bool = False
    response: JSONObject | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "status": self.status,
            "response_id": self.response_id,
            "model": self.model,
            "output_text": self.output_text,
            "streamed_text": self.streamed_text,
            "refusal": self.refusal,
            "output": self.output,
            "tool_calls": self.tool_calls,
            "usage": self.usage,
            "incomplete_details": self.incomplete_details,
            "error": self.error,
            "events": self.events,
            "last_sequence_number": self.last_sequence_number,
            "violations": [v.to_json() for v in self.violations],
            "terminal_event": self.terminal_event,
            "routing": self.routing,
            "rewritten": self.rewritten,
        }


def output_texts(output: list[JSONObject], part_type: str, name: str) -> list[str]:
    """The ``name`` strings of every ``part_type`` part of every message item, in output order."""
    found = []
    for item in output:
        if item.get("type") != "message":
            continue
        content = item.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == part_type:
                value = part.get(name)
                if isinstance(value, str):
                    found.append(value)
    return found


def tool_call_summary(item: JSONObject) -> JSONObject:
    """The ``tool_calls`` entry (DESIGN §3) of a ``function_call`` item."""
    return {
        "call_id": item.get("call_id"),
        "name": item.get("name"),
        "arguments": item.get("arguments"),
        "status": item.get("status"),
        "output": item.get("output"),
    }
