"""The client matrix: which real client runs which check in which dialect, and what is known not to work yet.

One source for the tests' parametrization (``cases``) and for the table in docs/clients.md (``render_table``;
test_docs_table.py fails when the doc and this file disagree), so a claim in the doc cannot go stale.

Every client talks to the real gateway on loopback whose upstream is the SIMULATED scripted one
(``MATRIX_UPSTREAM``): it answers ``ANSWER`` (a JSON document, so structured-output checks parse the same text),
and calls ``get_weather`` (or Codex's ``exec_command``) on a turn whose last message is not a tool result.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

__all__ = ["ANSWER", "CHECKS", "DIALECTS", "MATRIX_UPSTREAM", "PENDING", "PROMPT", "cases", "render_table", "scripted"]

DIALECTS = ("platform", "openai", "openresponses")
ANSWER = '{"city": "Paris", "forecast": "sunny"}'
# No fresh-facts word ("weather", "today"): the gateway's router would search first (a server tool call).
PROMPT = "Plan a day in Paris."
# The arguments the scripted upstream builds from get_weather's schema (every required string is "example").
WEATHER_ARGUMENTS = {"city": "example"}
MATRIX_UPSTREAM = f"scripted:0?delay_ms=0&tool=get_weather&text={quote(ANSWER)}"


def scripted(tool: str = "") -> str:
    """The scripted upstream answering ``ANSWER``, calling ``tool`` (a flat tool name) first when offered."""
    return f"scripted:0?delay_ms=0&tool={tool}&text={quote(ANSWER)}" if tool else f"scripted:0?text={quote(ANSWER)}"

# client -> its checks, in the order the doc lists them. A check is one real use of the client (see the tests).
CHECKS: dict[str, tuple[str, ...]] = {
    "openai (Node)": ("create_json", "create_stream", "tool_round_trip", "websocket"),
    "Vercel AI SDK (Node)": ("generate_text", "stream_text", "tool_round_trip", "generate_object"),
    "Agents SDK (Node)": ("run_sse", "run_sse_streamed", "run_websocket"),
    "Agents SDK (Python)": ("run_sse", "run_sse_streamed", "run_websocket"),
    "LangChain (Python)": ("invoke", "stream", "tool_call"),
    "pydantic-ai (Python)": ("run", "run_stream", "tool_round_trip", "native_output"),
    "litellm (Python)": ("responses_json", "responses_stream"),
    "Codex CLI": ("exec_turn", "code_mode_round_trip", "shell_round_trip"),
    "Codex CLI (WebSocket)": ("exec_turn", "shell_round_trip"),
}

# (client, check, dialect) -> why it fails today: strict xfails, so a fix that lands turns them into failures
# until the entry is removed here (and the doc regenerated). Issue #29's item numbers.
PENDING: dict[tuple[str, str, str], str] = {
    ("Codex CLI", "code_mode_round_trip", "openresponses"): (
        "the Open Responses spec has no custom tool call, so the gateway sends Codex's code-mode `exec` call as "
        "the extension item `respstream:custom_tool_call`, which Codex ignores: the turn ends without running it"),
}


def cases(client: str) -> list[object]:
    """``pytest.param(check, dialect)`` for every check of ``client`` in every dialect, pending ones xfail."""
    params: list[object] = []
    for check in CHECKS[client]:
        for dialect in DIALECTS:
            reason = PENDING.get((client, check, dialect))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(check, dialect, marks=marks, id=f"{check}-{dialect}"))
    return params


def render_table() -> str:
    """The Markdown table docs/clients.md carries between its ``client-matrix`` markers."""
    lines = ["| client | check | " + " | ".join(DIALECTS) + " |", "| --- | --- |" + " --- |" * len(DIALECTS)]
    for client, checks in CHECKS.items():
        for check in checks:
            cells = []
            for dialect in DIALECTS:
                reason = PENDING.get((client, check, dialect))
                cells.append(f"xfail: {reason}" if reason else "pass")
            lines.append(f"| {client} | `{check}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
