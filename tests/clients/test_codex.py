"""Codex CLI (``@openai/codex``, pinned in node/package-lock.json, its native binary inside the npm package) runs
``codex exec`` against the gateway, both inside a network namespace this test creates (loopback only: nothing can
leave). Codex keeps its default config; its ``config.toml`` only adds a provider entry for the gateway (see
docs/clients.md). The gateway (codex_gateway.py: the real app, SIMULATED scripted upstream) records every request
body, so each case checks what Codex really sent back.

- ``exec_turn``: Codex's default model (the gateway serves its name as an alias of ``auto``): its tools come in an
  ``additional_tools`` input item, the upstream answers text, the turn completes with that text.
- ``code_mode_round_trip``: the same, the upstream calls Codex's freeform ``exec`` tool (namespace ``functions``,
  JavaScript; a ``custom`` tool): Codex runs it and sends ``custom_tool_call_output``; the turn ends with text.
- ``shell_round_trip``: ``model = "auto"`` (Codex knows no metadata for it, so it lists its generic tools in
  ``tools``, the shell as the function ``exec_command``): the upstream calls it, Codex runs the command in bash and
  sends ``function_call_output``; the turn ends with text.
Needs root for ``ip netns`` (CI has it): a missing capability fails under CI=true and skips otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .codex_cli import IDLE_MS, INSTRUCTIONS, SETUPS, Runs, case_runs, embedded_turn, netns
from .matrix import ANSWER, cases

pytestmark = pytest.mark.clients
__all__ = ["netns"]  # the namespace fixture (codex_cli.py)

PORT = 8080  # a fresh namespace: every port is free (case i uses PORT + i)
# What the pinned Codex sends (docs/clients.md lists it; a new Codex version fails here until the doc is updated):
# (top-level body fields, tool types) with its default model, and with a model it has no metadata for.
SENT_DEFAULT = ({"client_metadata", "include", "input", "model", "parallel_tool_calls", "prompt_cache_key",
                 "reasoning", "store", "stream", "text", "tool_choice"}, {"namespace", "function", "custom"})
SENT_UNKNOWN_MODEL = ({"client_metadata", "include", "input", "model", "parallel_tool_calls", "prompt_cache_key",
                       "reasoning", "store", "stream", "tool_choice", "tools"}, {"namespace", "function", "web_search"})


def tool_types(body: dict[str, Any]) -> set[str]:
    listed = body.get("tools") or [t for i in body["input"] if i.get("type") == "additional_tools" for t in i["tools"]]
    return {t["type"] for t in listed} | {m["type"] for t in listed for m in t.get("tools", [])}


def items(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in request["body"]["input"] if i.get("type") not in ("message", "additional_tools")]


@pytest.fixture(scope="module")
def codex_runs(netns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Every case's run (three at a time: codex_cli.case_runs); each test waits for its own."""
    with case_runs(netns, "Codex CLI", PORT, tmp_path_factory) as runs:
        yield runs


@pytest.mark.parametrize(("check", "dialect"), cases("Codex CLI"))
def test_codex_exec(check: str, dialect: str, codex_runs: Runs) -> None:
    run = codex_runs[check, dialect].result()
    done, sent, model = run.done, run.sent, SETUPS[check][1]
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert done.stdout.strip() == ANSWER, done.stdout[-2000:]
    assert all(r["path"] == "/v1/responses" and r["method"] == "POST" for r in sent), sent
    first = sent[0]["body"]
    assert (set(first), tool_types(first)) == (SENT_DEFAULT if model is None else SENT_UNKNOWN_MODEL)
    assert (first["stream"], first["store"], first["include"]) == (True, False, ["reasoning.encrypted_content"])
    if check == "exec_turn":
        assert len(sent) == 1
        assert any(i.get("type") == "additional_tools" for i in sent[0]["body"]["input"])
        return
    assert len(sent) == 2, [items(r) for r in sent]
    call, output = items(sent[1])[-2:]  # store: false: the whole history again, ending with the call and its output
    assert call["call_id"] == output["call_id"]
    if check == "code_mode_round_trip":
        assert (call["type"], call["namespace"], call["name"], call["input"]) == (
            "custom_tool_call", "functions", "exec", "example")
        assert output["type"] == "custom_tool_call_output"
        assert "example is not defined" in json.dumps(output["output"])  # Codex ran the JavaScript
    else:
        assert (call["type"], call["name"], json.loads(call["arguments"])) == (
            "function_call", "exec_command", {"cmd": "example"})
        assert output["type"] == "function_call_output"
        assert "example: command not found" in output["output"]  # Codex ran the command in bash


@pytest.mark.model
@pytest.mark.timeout(900)  # wall time on a loaded machine; the work is about a minute of CPU (one model thread)
def test_codex_turn_on_the_embedded_model(netns: str, tmp_path: Path) -> None:
    """``codex exec`` on the small embedded model in the default dialect: Codex's default request (its tools; about
    1,700 tokens for SmolLM2 with the short base instructions, 6,000 with its own) on llama.cpp with one thread,
    which reads it for several times IDLE_MS (measured: 16 s of CPU; 90 s of wall time on a loaded machine). The
    turn completes only because the gateway's keepalive events (progress_events.py) count as events to Codex, which
    the ``: keep-alive`` comments do not."""
    run = embedded_turn(netns, tmp_path, PORT + 50)
    done, sent, timings, cpu = run.done, run.sent, run.timings, run.cpu_seconds
    print(f"codex on the embedded model: exit {done.returncode}, gateway CPU {cpu:.1f} s, {timings}")
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert sent and all(r["path"] == "/v1/responses" and r["method"] == "POST" for r in sent), sent
    assert (set(sent[0]["body"]), tool_types(sent[0]["body"])) == SENT_DEFAULT  # Codex's default request...
    assert INSTRUCTIONS in json.dumps(sent[0]["body"]["input"])  # ...with the short instructions
    assert len(timings) == len(sent), timings
    first, last = timings[0], timings[-1]
    # The model's first output came after Codex's idle timer would have fired: the keepalive events carried it.
    assert first["first_output_item"] * 1000 > IDLE_MS and first["keepalive_events"] >= 1, first
    answer = last["text"].strip()
    assert answer, timings  # the model answered text...
    assert done.stdout.strip() == answer, (done.stdout[-2000:], answer)  # ...and Codex printed that answer
