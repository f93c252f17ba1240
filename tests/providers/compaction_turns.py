"""The gateway side of the provider compaction tests (tests/providers/*/test_compaction.py): a history past the
compaction threshold, a response created through the gateway, and the compacted turn every provider is put through
(its SIMULATED provider answers ``"Noted."``, then SUMMARY for the summary request, then ANSWER)."""

from __future__ import annotations

from typing import Any

import httpx

from fakes.server_thread import ServerThread
from respstream.server.inputs.compaction_item import decode_compaction

__all__ = ["ANSWER", "COMPACT", "LONG", "SUMMARY", "compacted_turn", "create_response"]

LONG = " ".join(f"marigold{i}" for i in range(2400))  # past a 1,000-token threshold by any count
COMPACT = [{"type": "compaction", "compact_threshold": 1000}]
SUMMARY = "The user listed 2400 marigolds."
ANSWER = "You planted marigolds."


def create_response(gateway: ServerThread, model: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/responses`` (not streamed) of ``body`` to ``model``; the response, which must be a 200."""
    answer = httpx.post(f"{gateway.base_url}/responses", json={"model": model, "stream": False, **body}, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def compacted_turn(gateway: ServerThread, model: str) -> dict[str, Any]:
    """Garden notes of LONG, then "What did I plant?" continuing them with ``context_management`` COMPACT: the
    second response, checked to hold the compaction item (its summary SUMMARY) and then the answer ANSWER."""
    first = create_response(gateway, model, {"input": f"My garden notes: {LONG}"})
    second = create_response(gateway, model, {"input": "What did I plant?", "previous_response_id": first["id"],
                                              "context_management": COMPACT})
    assert [i["type"] for i in second["output"]] == ["compaction", "message"], second["output"]
    assert decode_compaction(second["output"][0]["encrypted_content"]) == SUMMARY
    assert second["output_text"] == ANSWER
    return second
