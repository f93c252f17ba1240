"""The board's scripts run (benchmarks/board.py --smoke): the floor and respstream always, each peer when installed.

Seconds-long runs with tiny loads: they say the scripts still start every system, measure it and report it, not how
fast anything is. A peer not installed in the bench-only folder (scripts/bench_board_install.sh) is skipped with the
reason; an installed peer must be measured, or be listed by the board as skipped with its reason (the board goes on).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _board(tmp_path: Path, systems: str, timeout: float) -> dict[str, Any]:
    out = tmp_path / "board.json"
    done = subprocess.run([sys.executable, str(BENCH / "board.py"), "--smoke", "--repeat", "1", "--systems", systems,
                           "--json", str(out)], cwd=ROOT, capture_output=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert (tmp_path / "board.md").read_text().startswith("| system |")
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _measured(report: dict[str, Any], name: str) -> None:
    row = report["rounds"][0][name]
    for key in ("latency_1_stream", "latency_64_stream"):
        assert row[key]["errors"] == {}, (name, key, row[key])
        assert row[key]["last_byte"]["n"] > 0
    assert row["cpu"]["events"] > 0 and row["cpu"]["errors"] == {}, row["cpu"]
    assert row["cpu"]["cpu_ms_per_1000_events"] >= 0  # (a tiny load may take under one clock tick of CPU)
    assert row["cpu_long"]["events"] > 0 and row["cpu_long"]["errors"] == {}, row["cpu_long"]
    memory = report["memory"][name]["sse"]
    assert memory["failures"] == 0 and memory["connections"] > 0, memory


def _upstream_module() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("fake_upstreams")
    finally:
        sys.path.remove(str(BENCH))


async def _raw(port: int, path: str, body: bytes, *, until_eof: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
    data = b""
    try:
        async with asyncio.timeout(2):
            while not (data.endswith(b"0\r\n\r\n") or (b"application/json" in data and data.endswith(b"}"))):
                chunk = await reader.read(65536)
                if not chunk:
                    break
                data += chunk
    except TimeoutError:
        assert not until_eof, "the SIMULATED upstream did not finish its answer"
    writer.close()
    return data


async def test_the_simulated_upstream_answers_each_route() -> None:
    fake = _upstream_module()
    server = await fake.start_upstream(10)
    port = server.sockets[0].getsockname()[1]
    try:
        chat = await _raw(port, "/v1/chat/completions", b'{"stream": true}')
        assert chat.count(b'"delta":{"content":') == 10 and chat.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
        long = await _raw(port, "/long/v1/chat/completions", b'{"stream": true}')
        assert long.count(b'"delta":{"content":') == fake.LONG_DELTAS
        native = await _raw(port, "/v1/responses", b'{"stream": true}')
        assert native.count(b"response.output_text.delta") == 2 * 10 and b"response.completed" in native
        cut = await _raw(port, "/cut/v1/chat/completions", b'{"stream": true}')
        assert b"[DONE]" not in cut and not cut.endswith(b"0\r\n\r\n")  # closed mid-body
        stalled = await _raw(port, "/stall/v1/responses", b'{"stream": true}', until_eof=False)
        assert stalled.count(b"\ndata: ") == 1 and b"response.created" in stalled
        plain = await _raw(port, "/v1/chat/completions", b'{"stream": false}')
        assert b'"object":"chat.completion"' in plain
    finally:
        server.close()


@pytest.mark.timeout(400)
def test_the_board_runs_the_floor_and_respstream(tmp_path: Path) -> None:
    report = _board(tmp_path, "floor,respstream", timeout=380)
    assert report["skipped"] == {}
    for name in ("floor", "respstream"):
        _measured(report, name)
    assert report["rounds"][0]["respstream"]["latency_1_json"]["errors"] == {}
    assert report["memory"]["respstream"]["websocket"]["failures"] == 0
    resume = report["resume"]
    assert resume["resumed"] == resume["rounds"] > 0 and resume["first_event_p50_ms"] > 0, resume
    checks = report["correctness"]["respstream"]
    assert checks["normal"]["violations"] == 0, checks
    # The upstream cut mid-stream: the gateway still ends the client's stream with a terminal the checker accepts.
    assert checks["cut"]["violations"] == 0, checks
    assert checks["cut"]["final_status"] in ("error", "failed", "incomplete"), checks


def _installed(name: str) -> str | None:
    sys.path.insert(0, str(BENCH))
    try:
        systems = importlib.import_module("board_systems")
    finally:
        sys.path.remove(str(BENCH))
    where = {
        "litellm": systems.PEERS_DIR / "litellm" / "bin" / "litellm",
        "portkey": systems.PEERS_DIR / "portkey" / "node_modules" / "@portkey-ai" / "gateway" / "build"
        / "start-server.js",
        "respstream-granian": Path(sys.executable).parent / "granian",
    }[name]
    return None if where.exists() else f"{name} is not installed ({where} missing; scripts/bench_board_install.sh)"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("peer", ["litellm", "portkey", "respstream-granian"])
def test_the_board_runs_each_installed_peer(tmp_path: Path, peer: str) -> None:
    missing = _installed(peer)
    if missing:
        pytest.skip(missing)
    report = _board(tmp_path, f"respstream,{peer}", timeout=580)
    if peer in report["skipped"]:
        assert report["skipped"][peer].strip(), "a skipped peer must carry its reason"
        assert peer in (tmp_path / "board.md").read_text()
        return
    _measured(report, peer)
    assert report["correctness"][peer]["normal"]["violations"] is not None
