"""A request shaped like Codex CLI's (the shape tests/interop/test_codex_shaped_request.py pins down: namespace,
custom and hosted tools, ``reasoning``, ``text.verbosity``, ``service_tier: priority``, ``prompt_cache_key``,
``parallel_tool_calls: false``, ``store: false`` with the whole history sent back, the encrypted reasoning
included) through the default gateway, in each dialect, to the SIMULATED Anthropic provider: every field is taken,
Claude's thinking and shell call come back, and the second turn returns the signed thinking in place."""

from __future__ import annotations

from typing import Any

from fakes.server_thread import ServerThread
from interop.codex_tools import CODEX_TOOLS

from .conftest import MODELS, post
from .made_streams import text_stream, thinking_tool_stream
from .simulated_anthropic import Reply, SimulatedAnthropic

FIRST_TURN: list[Any] = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions/>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
]


def codex_body(history: list[Any]) -> dict[str, Any]:
    return {
        "model": MODELS[-1], "instructions": "You are Codex.", "input": history,
        "tools": CODEX_TOOLS,
        "tool_choice": "auto", "parallel_tool_calls": False, "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", "service_tier": "priority",
        "text": {"verbosity": "low"}, "client_metadata": {"originator": "codex_exec", "session": "s-1"},
    }


def test_codex_shaped_turn_and_shell_round_trip(default_gateway: tuple[str, ServerThread],
                                                sim: SimulatedAnthropic) -> None:
    dialect, gateway = default_gateway
    sim.replies.extend([Reply(thinking_tool_stream("List them with ls.", "SIG-CODEX", "exec_command", {"cmd": "ls"},
                                                   call_id="toolu_codex")),
                        Reply(text_stream("README.md and src."))])
    first, violations, response = post(gateway, codex_body(FIRST_TURN), dialect)
    assert response.status_code == 200, response.text
    assert violations == [] and first["status"] == "completed", first["error"]
    sent = sim.requests[0].body
    assert [b["text"] for b in sent["system"]][:2] == ["You are Codex.", "<permissions/>"]
    assert "concisely" in sent["system"][-1]["text"]
    assert {t["name"] for t in sent["tools"]} >= {"exec_command", "multi_agent__spawn_agent", "multi_agent__wait",
                                                  "apply_patch"}
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert sent["thinking"]["type"] == "enabled" and sent["service_tier"] == "auto"
    assert "cache_control" in sent["system"][-1] and "cache_control" in sent["tools"][-1]
    call = next(i for i in first["output"] if i["type"] == "function_call")
    reasoning = next(i for i in first["output"] if i["type"].endswith("reasoning"))
    assert (call["name"], reasoning["encrypted_content"]) == ("exec_command", "SIG-CODEX")
    history = [*FIRST_TURN, reasoning, {k: call[k] for k in ("type", "call_id", "name", "arguments")},
               {"type": "function_call_output", "call_id": call["call_id"], "output": "README.md\nsrc\n"}]
    second, violations, response = post(gateway, codex_body(history), dialect)
    assert response.status_code == 200, response.text
    assert violations == [] and second["status"] == "completed" and second["output_text"] == "README.md and src."
    turns = sim.requests[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"][0] == {"type": "thinking", "thinking": "List them with ls.", "signature": "SIG-CODEX"}
    assert turns[1]["content"][1]["type"] == "tool_use" and turns[1]["content"][1]["id"] == "toolu_codex"
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_codex",
                                      "content": "README.md\nsrc\n"}
    assert sim.problems == []
