"""A request shaped like Codex CLI's (issue #29) on our gateway over loopback, every dialect, SIMULATED scripted
upstream: zstd body, ``session-id``/``thread-id`` headers, ``store: false`` with the whole history (an encrypted
reasoning item the client got back, a shell call and its output), ``include: ["reasoning.encrypted_content"]``,
``prompt_cache_key``, ``client_metadata``, ``service_tier``, ``text.verbosity``, and tools of every kind Codex
lists: function, ``namespace`` (its multi-agent tools), ``custom`` (freeform ``apply_patch`` with a Lark grammar),
``web_search`` and a deferred function with ``tool_search``. The stream must be accepted and conformant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard

from respstream.protocol.stream import StreamCore

from .codex_tools import CODEX_TOOLS
from .gateways import Gateway, serve


def codex_body(history: list[Any]) -> dict[str, Any]:
    return {
        "model": "auto", "instructions": "You are Codex.", "input": history, "tools": CODEX_TOOLS,
        "tool_choice": "auto", "parallel_tool_calls": False, "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", "service_tier": "priority",
        "text": {"verbosity": "low"}, "client_metadata": {"originator": "codex_exec", "session": "s-1"},
    }


FIRST_TURN: list[Any] = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions/>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
]


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def gateway(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, "scripted:4?delay_ms=1&tool=exec_command")


def post(gateway: Gateway, body: dict[str, Any]) -> StreamCore:
    packed = zstandard.ZstdCompressor().compress(json.dumps(body).encode())
    headers = {"content-type": "application/json", "content-encoding": "zstd", "accept": "text/event-stream",
               "session-id": "s-1", "thread-id": "t-1"}
    r = httpx.post(f"{gateway.base_url}/responses", content=packed, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    core = StreamCore(dialect=gateway.dialect)
    core.feed(r.content)
    core.close()
    return core


def test_codex_turn_and_shell_round_trip(gateway: Gateway) -> None:
    first = post(gateway, codex_body(FIRST_TURN))
    assert first.violations == [] and first.result.status == "completed"
    call = next(item for item in first.result.output if item.get("type") == "function_call")
    assert call["name"] == "exec_command"
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"}
    history = [*FIRST_TURN, reasoning, {k: call[k] for k in ("type", "call_id", "name", "arguments")},
               {"type": "function_call_output", "call_id": call["call_id"], "output": "README.md\nsrc\n"}]
    second = post(gateway, codex_body(history))
    assert second.violations == [] and second.result.status == "completed"
    assert second.result.output_text
    response = second.result.response or {}
    assert response.get("client_metadata") == {"originator": "codex_exec", "session": "s-1"}
    assert response.get("prompt_cache_key") == "0199a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"
