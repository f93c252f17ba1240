"""Values the fuzzer found that once escaped as bare exceptions; each must now assemble to a clean result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from respstream.protocol.stream import StreamCore


def _replay(events: list[dict[str, Any]]) -> dict[str, Any]:
    body = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events)
    core = StreamCore()
    core.feed(body)
    core.events()
    core.close()
    core.events()
    return core.result.to_json()


def test_a_list_as_the_terminal_status_falls_back_to_the_event_type() -> None:
    result = _replay([{"type": "response.incomplete", "response": {"status": []}}])
    assert result["status"] == "incomplete"


@pytest.mark.parametrize("command_index", [-1, -5, -(2**40)])
def test_a_negative_shell_command_index_is_ignored(command_index: int) -> None:
    result = _replay([
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {"id": "sh", "type": "shell_call_output", "output": []}},
        {"type": "response.shell_call_output_content.delta", "sequence_number": 2, "item_id": "sh",
         "output_index": 0, "command_index": command_index, "delta": {"stdout": "x"}},
        {"type": "response.completed", "sequence_number": 3, "response": {"id": "r", "status": "completed"}},
    ])
    assert result["status"] == "completed"
    assert all("x" not in json.dumps(item) for item in result["output"])
