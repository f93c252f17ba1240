"""Real, unmodified Node clients against the gateway: the official ``openai`` SDK, the Vercel AI SDK and the JS
Agents SDK, pinned in node/package-lock.json (``make clients`` installs them with ``npm ci``).

Each program in node/ runs all its checks once per dialect and prints a JSON report (common.mjs); each check is
one test case here, asserting what the client really got: the scripted upstream's text, the tool call's name and
arguments, the client's own outcome (no exception, a success status).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from interop.gateways import Gateway

from .conftest import missing
from .matrix import ANSWER, WEATHER_ARGUMENTS, cases

pytestmark = pytest.mark.clients

NODE_DIR = Path(__file__).parent / "node"
PROGRAMS = {"openai (Node)": "openai_sdk.mjs", "Vercel AI SDK (Node)": "ai_sdk.mjs", "Agents SDK (Node)": "agents.mjs"}
_reports: dict[tuple[str, str], dict[str, Any]] = {}


def report(client: str, gateway: Gateway) -> dict[str, Any]:
    """The program's report for this gateway, run once per (program, dialect)."""
    key = (client, gateway.dialect)
    if key not in _reports:
        node = shutil.which("node")
        if node is None or not (NODE_DIR / "node_modules" / ".package-lock.json").exists():
            missing("the Node clients are not installed (`make clients`: node and npm ci in tests/clients/node)")
        # --experimental-websocket: Node 20's global WebSocket (built in from Node 22), which the Agents SDK's
        # WebSocket transport needs; the AI SDK's warnings would only clutter stderr.
        env = {**os.environ, "AI_SDK_LOG_WARNINGS": "false", "NODE_NO_WARNINGS": "1"}
        done = subprocess.run(
            [node, "--experimental-websocket", PROGRAMS[client], gateway.base_url],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=90, env=env, check=False,
        )
        assert done.returncode == 0, f"{PROGRAMS[client]} exited {done.returncode}: {done.stderr[-3000:]}"
        _reports[key] = json.loads(done.stdout.strip().splitlines()[-1])
    return _reports[key]


def assert_check(seen: dict[str, Any], check: str) -> None:
    assert seen["ok"], seen.get("error")
    if "status" in seen:
        assert seen["status"] in ("completed", "response.completed", "stop"), seen
    if "object" in seen:
        assert seen["object"] == json.loads(ANSWER)
    else:
        assert seen["text"] == ANSWER
    if "tool_round_trip" in check or check.startswith("run_"):
        assert [(c["name"], json.loads(c["arguments"])) for c in seen["tool_calls"]] == [
            ("get_weather", WEATHER_ARGUMENTS)
        ], seen
        if "executed" in seen:  # the SDK ran the tool itself, with the call's arguments
            assert seen["executed"] == [WEATHER_ARGUMENTS["city"]]


@pytest.mark.parametrize(("check", "gateway"), cases("openai (Node)"), indirect=["gateway"])
def test_openai_node(check: str, gateway: Gateway) -> None:
    assert_check(report("openai (Node)", gateway)[check], check)


@pytest.mark.parametrize(("check", "gateway"), cases("Vercel AI SDK (Node)"), indirect=["gateway"])
def test_ai_sdk(check: str, gateway: Gateway) -> None:
    assert_check(report("Vercel AI SDK (Node)", gateway)[check], check)


@pytest.mark.parametrize(("check", "gateway"), cases("Agents SDK (Node)"), indirect=["gateway"])
def test_agents_node(check: str, gateway: Gateway) -> None:
    assert_check(report("Agents SDK (Node)", gateway)[check], check)
