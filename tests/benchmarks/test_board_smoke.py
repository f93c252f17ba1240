"""The board's scripts run (benchmarks/board.py --smoke): the floor and respstream always, each peer when installed.

Seconds-long runs with tiny loads: they say the scripts still start every system, measure it and report it, not how
fast anything is. A peer not installed in the bench-only folder (scripts/bench_board_install.sh) is skipped with the
reason; an installed peer must be measured (the board itself would list it as skipped and go on; here that fails).
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
    sides = ("sse",) if report["systems"][name]["no_websocket"] else ("sse", "websocket")
    for side in sides:  # active connections: every one held, and still receiving events when RSS was read
        active = report["memory"][name][f"{side}_active"]
        assert active["failures"] == 0 and active["active"] == active["connections"] > 0, (name, side, active)
    if report["systems"][name]["no_websocket"]:  # no WebSocket mode: not measured, and the table says why
        assert "ws_vs_sse" not in row and "ws_vs_sse_long" not in row, row
        assert f"| {name} | n/a ({report['systems'][name]['no_websocket']}) |" in _board_md(report)
        return
    for key, deltas in (("ws_vs_sse", 10), ("ws_vs_sse_long", 200)):
        compared = row[key]
        assert compared["failures"] == {"websocket": {}, "sse": {}}, (name, key, compared)
        # the same responses on both sides: as many events, and more than the deltas each (created ... completed)
        assert compared["events"]["websocket"] == compared["events"]["sse"], compared
        assert min(compared["events"]["sse"]) > 0, compared
        per_response = compared["events_per_response"]
        assert per_response["websocket"] == per_response["sse"] > deltas, compared
        assert compared["websocket_cpu_ms_per_1000_events"] is not None, compared


def _board_md(report: dict[str, Any]) -> str:
    return str(_bench("board_report").table(report))


def _bench(module: str) -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(BENCH))


def _report_with_every_measure() -> dict[str, Any]:
    """A board report as board.py writes it, its figures made up for the tables' sake: respstream measured on every
    measure, the floor (not a gateway) and LiteLLM (no WebSocket mode, no resume) where they can be."""
    round_ = {"respstream": {"latency_1_stream": {"last_byte": {"added_p50_ms": 0.8, "added_p99_ms": 1.4}},
                             "cpu": {"cpu_ms_per_1000_events": 50.0, "events_per_s": 9000},
                             "ws_vs_sse": {"websocket_cpu_ms_per_1000_events": 45.0,
                                           "sse_cpu_ms_per_1000_events": 50.0, "websocket_over_sse": 0.9},
                             "ws_vs_sse_long": {"websocket_cpu_ms_per_1000_events": 6.6,
                                                "sse_cpu_ms_per_1000_events": 6.0, "websocket_over_sse": 1.1}},
              "floor": {"latency_1_stream": {"last_byte": {"added_p50_ms": 0.4, "added_p99_ms": 0.7}},
                        "cpu": {"cpu_ms_per_1000_events": 25.0, "events_per_s": 20000}},
              "litellm": {"latency_1_stream": {"last_byte": {"added_p50_ms": 24.0, "added_p99_ms": 70.0}}}}
    return {
        "systems": {"floor": {"gateway": False, "no_websocket": "no WebSocket mode"},
                    "respstream": {"gateway": True, "no_websocket": ""},
                    "litellm": {"gateway": True, "no_websocket": "no WebSocket mode"}},
        "rounds": [round_],
        "memory": {"respstream": {
            "sse": {"connections": 1000, "websocket": False, "kib_per_connection": 46.4, "failures": 0},
            "websocket": {"connections": 1000, "websocket": True, "kib_per_connection": 41.1, "failures": 0},
            "sse_active": {"connections": 1000, "active": 1000, "kib_per_connection": 51.2, "failures": 0},
            "websocket_active": {"connections": 1000, "active": 990, "kib_per_connection": 76.8, "failures": 10}},
            "litellm": {"sse": {"connections": 1000, "websocket": False, "kib_per_connection": 152.0,
                                "failures": 0, "no_byte_yet": 1000},
                        "sse_active": {"connections": 1000, "active": 1000, "kib_per_connection": 102.4}}},
        "correctness": {"floor": {"normal": {"violations": 0, "codes": []}},
                        "respstream": {"normal": {"violations": 0, "codes": []},
                                       "cut": {"violations": 0, "codes": []}},
                        "litellm": {"normal": {"violations": 0, "codes": []},
                                    "cut": {"violations": 1, "codes": ["lifecycle.created_not_first"]}}},
        "compliance": {"floor": {"score": None, "reason": "not a gateway"},
                       "respstream": {"score": "17/17", "passed": 17, "total": 17, "failed": {}},
                       "litellm": {"score": "2/17", "passed": 2, "total": 17,
                                   "failed": {"websocket-response": "closed", "basic-response": "schema"}}},
        "resume": {"rounds": 200, "resumed": 200, "errors": {}, "after": 5, "first_event_p50_ms": 0.71,
                   "first_event_p99_ms": 3.9},
    }


def test_the_tables_hold_every_measure_or_say_why_not() -> None:
    report = _report_with_every_measure()
    text = _board_md(report)
    # WebSocket vs SSE: the figures and their ratio, or why there is none
    assert "| respstream | 45.00 / 50.00 (**0.90x**) | 6.60 / 6.00 (**1.10x**) |" in text, text
    assert "| litellm | n/a (no WebSocket mode) | n/a (no WebSocket mode) |" in text, text
    # memory: idle and active, SSE and WebSocket; connections that were not active are counted
    assert ("| respstream | 46.4 (45.3 MiB) | 41.1 (40.1 MiB) | 51.2 (50.0 MiB) "
            "| 76.8 (75.0 MiB), 10 of 1000 not active (10 failed) |") in text, text
    assert ("| litellm | 152.0 (148.4 MiB), 1000 without a byte yet | n/a (no WebSocket mode) | 102.4 (100.0 MiB) "
            "| n/a (no WebSocket mode) |") in text, text
    # a measure the system could take but this report has no figure for is not passed off as n/a
    assert "| floor | not in this run | n/a (no WebSocket mode) | not in this run | n/a (no WebSocket mode) |" in text
    # correctness and resume: check normal / cut, the suite's score, resume p50 / p99
    assert "| respstream | 0 (ok) | 0 (ok) | 17/17 | 0.71 / 3.90 |" in text, text
    assert "| litellm | 0 (ok) | 1 (lifecycle.created_not_first) | 2/17 | n/a (no stream resume) |" in text, text
    no_upstream = "n/a (not a gateway: one pre-encoded answer, no upstream)"  # no cut stream, nothing to resume
    assert f"| floor | 0 (ok) | {no_upstream} | n/a (not a gateway) | {no_upstream} |" in text, text
    # the speed table: the floor has no non-streaming figure, and says why
    assert "| floor | 0.40 / 0.70 (0.50x) | not in this run | n/a (not a gateway" in text, text
    summary = _bench("board_report").summarize(report)["respstream"]
    assert "ws_over_sse_vs_respstream" not in summary  # a ratio is not compared with itself


def test_the_plots_are_drawn_from_a_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    plots = _bench("board_plots")
    monkeypatch.setattr(plots, "IMG", tmp_path)
    report = _report_with_every_measure()
    written = plots.draw_plots(report, _bench("board_report").summarize(report), "board")
    assert [p.name for p in written] == ["board_latency.png", "board_cpu.png", "board_memory.png",
                                         "board_correctness.png"]
    for path in written:
        assert path.read_bytes().startswith(b"\x89PNG") and path.stat().st_size > 5000, path


def test_the_board_redraws_from_an_earlier_runs_json_without_measuring(tmp_path: Path) -> None:
    report = _report_with_every_measure()
    source = tmp_path / "earlier.json"
    source.write_text(json.dumps(report))
    done = subprocess.run([sys.executable, str(BENCH / "board.py"), "--from-json", str(source), "--json",
                           str(tmp_path / "redrawn.json")], cwd=ROOT, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert (tmp_path / "redrawn.md").read_text() == _board_md(report) + "\n"
    assert json.loads(source.read_text()) == report  # read, not rewritten
    assert not (tmp_path / "redrawn.json").exists()
    # --docs links the JSON from docs/: one elsewhere is refused before anything is drawn
    refused = subprocess.run([sys.executable, str(BENCH / "board.py"), "--from-json", str(source), "--docs"],
                             cwd=ROOT, capture_output=True, timeout=60, check=False)
    assert refused.returncode != 0 and b"is not there" in refused.stderr, refused.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"rounds": ')
    failed = subprocess.run([sys.executable, str(BENCH / "board.py"), "--from-json", str(broken)], cwd=ROOT,
                            capture_output=True, timeout=60, check=False)
    assert failed.returncode != 0 and b"cannot read the board's JSON" in failed.stderr, failed.stderr
    assert b"Traceback" not in failed.stderr


def _upstream_module() -> Any:
    return _bench("fake_upstreams")


def test_the_suite_upstream_calls_an_offered_tool_and_otherwise_answers_text() -> None:
    from starlette.testclient import TestClient

    upstream = _bench("suite_upstream")
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
    with TestClient(upstream.app) as client:
        plain = client.post("/v1/chat/completions",
                            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert plain.json()["choices"][0]["message"]["content"] == upstream.ANSWER
        called = client.post("/v1/chat/completions", json={"model": "m", "tools": [tool],
                                                           "messages": [{"role": "user", "content": "weather?"}]})
        call = called.json()["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"location": "San Francisco, CA"}
        streamed = client.post("/v1/chat/completions", json={
            "model": "m", "stream": True, "stream_options": {"include_usage": True}, "tools": [tool],
            "messages": [{"role": "user", "content": "weather?"}]}).text
        assert '"tool_calls": [{"index": 0' in streamed and '"finish_reason": "tool_calls"' in streamed
        assert '"usage"' in streamed and streamed.endswith("data: [DONE]\n\n")
        refused = client.post("/v1/chat/completions", json={"model": "m", "messages": []})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "messages"


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
        # /drip/: the long stream, a frame every DRIP_SECONDS: a few frames in _raw's 2 s, then still going
        dripped = await _raw(port, "/drip/v1/chat/completions", b'{"stream": true}', until_eof=False)
        assert 1 <= dripped.count(b'"delta":{"content":') <= 2 / fake.DRIP_SECONDS + 1, dripped
        assert dripped.count(b"\r\ndata: ") >= 3 and not dripped.endswith(b"0\r\n\r\n"), dripped
        plain = await _raw(port, "/v1/chat/completions", b'{"stream": false}')
        assert b'"object":"chat.completion"' in plain
    finally:
        server.close()


async def test_a_stream_ends_at_its_last_chunk_when_the_server_keeps_the_connection() -> None:
    """Portkey forwards the upstream's ``connection: keep-alive`` and so ignores the load's ``Connection: close``:
    the load generator must take the last chunk as the end, not wait for the server's keep-alive timeout."""
    loadgen = _bench("loadgen")
    frames = b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in [b"data: {}\n\n"] * 3)
    release = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n" + frames
                     + b"0\r\n\r\n")
        try:  # keeps the connection open, as a keep-alive server would, until the test is over
            await asyncio.wait_for(release.wait(), 30)
        finally:
            writer.close()  # (closed before the loop ends: no unclosed transport for a later test's collector)

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        request = loadgen.build_request("127.0.0.1", port, "/", b"{}")
        async with asyncio.timeout(5):
            out = await loadgen.stream_once("127.0.0.1", port, request, timeout=20, frame=b"\ndata:")
        assert out.error is None and out.events == 3, out
    finally:
        release.set()
        await asyncio.sleep(0.05)  # the handler closes its connection
        server.close()
        await server.wait_closed()


@pytest.mark.timeout(400)
def test_the_board_runs_the_floor_and_respstream(tmp_path: Path) -> None:
    report = _board(tmp_path, "floor,respstream", timeout=380)
    assert report["skipped"] == {}
    for name in ("floor", "respstream"):
        _measured(report, name)
    assert report["rounds"][0]["respstream"]["latency_1_json"]["errors"] == {}
    assert report["memory"]["respstream"]["websocket"]["failures"] == 0
    assert "ws_vs_sse" in report["rounds"][0]["respstream"]  # respstream has a WebSocket mode: it is measured
    resume = report["resume"]
    assert resume["resumed"] == resume["rounds"] > 0 and resume["first_event_p50_ms"] > 0, resume
    checks = report["correctness"]["respstream"]
    assert checks["normal"]["violations"] == 0, checks
    # The upstream cut mid-stream: the gateway still ends the client's stream with a terminal the checker accepts.
    assert checks["cut"]["violations"] == 0, checks
    assert checks["cut"]["final_status"] in ("error", "failed", "incomplete"), checks
    suite = report["compliance"]
    assert suite["floor"]["score"] is None, suite
    if _bench("board_compliance").suite_dir() is None:  # (then every system's reason is the missing suite)
        assert "OPENRESPONSES_SUITE" in suite["floor"]["reason"], suite
        assert suite["respstream"]["score"] is None and "OPENRESPONSES_SUITE" in suite["respstream"]["reason"]
    else:  # the public suite, respstream in front of the SIMULATED Chat Completions upstream: every test passes
        assert "not a gateway" in suite["floor"]["reason"], suite
        assert suite["respstream"]["score"] == "17/17", suite["respstream"]
    assert "| Open Responses suite |" in (tmp_path / "board.md").read_text()


def _installed(name: str) -> str | None:
    sys.path.insert(0, str(BENCH))
    try:
        systems = importlib.import_module("board_systems")
    finally:
        sys.path.remove(str(BENCH))
    where = {
        "litellm": systems.PEERS_DIR / "litellm" / "bin" / "litellm",
        # the pins file: written by the install script only when npm honoured the hono pair Portkey runs with
        "portkey": systems.PEERS_DIR / "portkey" / "pins",
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
    # An installed peer is measured: a board that skips it (its first request failed) is a failure here.
    assert peer not in report["skipped"], report["skipped"]
    _measured(report, peer)
    assert report["correctness"][peer]["normal"]["violations"] is not None
    if _bench("board_compliance").suite_dir() is not None:  # a score, whatever it is, never a silent n/a
        assert report["compliance"][peer]["score"] is not None, report["compliance"][peer]
