"""Codex CLI over WebSocket: the same ``codex exec`` cases as test_codex.py with ``supports_websockets = true`` on
its provider entry, in the network namespace (loopback only), against codex_gateway.py (the real app, SIMULATED
scripted upstream), which records the upgrade, every message Codex sends on the socket and each event's type.

Codex must stay on the socket: one upgrade of ``GET /v1/responses``, no ``POST /v1/responses`` (its HTTP fallback),
no "Falling back from WebSockets" on its stderr. Its session opens with a prewarm (``generate: false``), answered with
``response.created`` ... ``response.completed``, ``output: []``, 0 output tokens and no output events; its turn(s)
follow on the same socket.
Needs root for ``ip netns`` (CI has it): a missing capability fails under CI=true and skips otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .codex_cli import Runs, case_runs, codex_config, embedded_turn, netns
from .matrix import ANSWER, cases

pytestmark = pytest.mark.clients
__all__ = ["netns"]  # the namespace fixture (codex_cli.py), shared with test_codex.py

PORT = 8180  # case i uses PORT + i in its own namespace
CLIENT = "Codex CLI (WebSocket)"
FALLBACK = "Falling back from WebSockets"


def websocket_config(model: str | None, port: int) -> str:
    """test_codex.py's config.toml with ``supports_websockets = true`` on the gateway's provider entry."""
    return codex_config(model, port) + "supports_websockets = true\n"


@pytest.fixture(scope="module")
def websocket_runs(netns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    with case_runs(netns, CLIENT, PORT, tmp_path_factory, websocket_config) as runs:
        yield runs


def responses(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The socket's events cut into responses (each from its response.metadata, else its response.created, to its
    terminal)."""
    out: list[list[dict[str, Any]]] = []
    for event in events:
        if event["event"] == "response.metadata" or (
                event["event"] == "response.created" and not (out and out[-1][-1]["event"] == "response.metadata")):
            out.append([])
        if out:
            out[-1].append(event)
    return out


@pytest.mark.parametrize(("check", "dialect"), cases(CLIENT))
def test_codex_exec_over_websocket(check: str, dialect: str, websocket_runs: Runs) -> None:
    run = websocket_runs[check, dialect].result()
    done, sent = run.done, run.sent
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert done.stdout.strip() == ANSWER, done.stdout[-2000:]
    assert FALLBACK not in done.stderr, done.stderr[-3000:]
    assert not [r for r in sent if r["type"] == "http" and r["path"] == "/v1/responses"], "fell back to HTTP"
    upgrades = [r for r in sent if r["type"] == "websocket"]
    assert len(upgrades) >= 1 and all(r["path"] == "/v1/responses" for r in upgrades)
    messages = [r["body"] for r in sent if r["type"] == "websocket.message"]
    assert messages and messages[0]["type"] == "response.create" and messages[0].get("generate") is False
    turns = [m for m in messages if m.get("generate", True)]
    assert len(turns) == (1 if check == "exec_turn" else 2), [m.get("type") for m in messages]
    per_response = responses([r for r in sent if r["type"] == "websocket.event"])
    shown = [[e["event"] for e in r] for r in per_response]
    prewarm = per_response[0]
    assert [e["event"] for e in prewarm][-1] == "response.completed", shown
    assert not [e for e in prewarm if str(e["event"]).startswith(("response.output_", "response.content_part"))]
    assert prewarm[-1]["output"] == 0 and prewarm[-1]["usage"]["output_tokens"] == 0
    warm = messages[0]
    if warm.get("input") or warm.get("tools") or warm.get("instructions"):  # (Codex's default model sends none)
        assert prewarm[-1]["usage"]["input_tokens"] > 0
    assert [r[-1]["event"] for r in per_response[1:]] == ["response.completed"] * len(turns), shown
    assert all(r[-1]["output"] > 0 for r in per_response[1:])
    # Codex sends client_metadata: each response starts with its turn state, the same within a turn
    states = [r[0]["headers"]["x-codex-turn-state"] for r in per_response if r[0]["event"] == "response.metadata"]
    assert len(states) == len(per_response) and all(states), shown
    if len(turns) == 2:
        assert states[1] == states[2]  # the tool round trip is one turn
    # Codex honours the event: each request after the first sends back the turn state it last received
    sent_back = [(m.get("client_metadata") or {}).get("x-codex-turn-state") for m in messages[1:]]
    assert sent_back == states[:len(sent_back)], (sent_back, states)


@pytest.mark.model
@pytest.mark.timeout(900)  # wall time on a loaded machine (see test_codex.py's embedded case)
def test_codex_turn_on_the_embedded_model_over_websocket(netns: str, tmp_path: Path) -> None:
    """test_codex.py's embedded case (the small model, one llama.cpp thread, Codex's short instructions, its idle
    timer cut to IDLE_MS) over the socket: the prewarm is answered without touching the model, the turn on the same
    socket is the model's answer, which Codex prints; the keepalive events carry it past Codex's idle timer."""
    run = embedded_turn(netns, tmp_path, PORT + 50, config_for=websocket_config)
    done, sent = run.done, run.sent
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert FALLBACK not in done.stderr, done.stderr[-3000:]
    assert not [r for r in sent if r["type"] == "http" and r["path"] == "/v1/responses"], "fell back to HTTP"
    messages = [r["body"] for r in sent if r["type"] == "websocket.message"]
    assert messages[0].get("generate") is False and [m.get("generate", True) for m in messages[1:]] == [True]
    per_response = responses([r for r in sent if r["type"] == "websocket.event"])
    assert per_response[0][-1]["event"] == "response.completed" and per_response[0][-1]["output"] == 0
    turn = per_response[1]
    assert turn[-1]["event"] == "response.completed" and turn[-1]["usage"]["output_tokens"] > 0
    assert any(str(e["event"]).endswith("keepalive") for e in turn)  # what kept Codex's idle timer quiet
    assert done.stdout.strip()  # Codex printed the model's answer
