"""The board's report: per-system figures (median over repeats), ratios taken within each repeat against respstream
and the floor (then their median), the Markdown tables, and the docs/benchmarks.md section (the PNGs:
benchmarks/board_plots.py).

Every measure has a cell in a table: a figure, ``n/a (why)`` where the system cannot do it (the floor is not a
gateway; a peer has no WebSocket mode or no stream resume), or ``not in this run`` where it could but the report
holds no figure (an older run's JSON read back with ``board.py --from-json``)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

__all__ = ["FIGURES", "NOT_RUN", "correctness_table", "memory_table", "speed_table", "suite_notes", "summarize",
           "table", "transport_table", "update_docs", "why_not", "write_outputs"]

START, END = "<!-- board:start -->", "<!-- board:end -->"
NOT_RUN = "not in this run"


def _get(row: dict[str, Any], path: str) -> float | None:
    value: Any = row
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, (int, float)) and value == value else None


FIGURES = {
    "stream_1_p50": "latency_1_stream.last_byte.added_p50_ms",
    "stream_1_p99": "latency_1_stream.last_byte.added_p99_ms",
    "first_1_p50": "latency_1_stream.first_event.added_p50_ms",
    "json_1_p50": "latency_1_json.last_byte.added_p50_ms",
    "json_1_p99": "latency_1_json.last_byte.added_p99_ms",
    "stream_64_p50": "latency_64_stream.last_byte.added_p50_ms",
    "stream_64_p99": "latency_64_stream.last_byte.added_p99_ms",
    "cpu_per_1000": "cpu.cpu_ms_per_1000_events",
    "events_per_s": "cpu.events_per_s",
    "cpu_long_per_1000": "cpu_long.cpu_ms_per_1000_events",
    "events_long_per_s": "cpu_long.events_per_s",
    "ws_cpu_per_1000": "ws_vs_sse.websocket_cpu_ms_per_1000_events",
    "ws_sse_cpu_per_1000": "ws_vs_sse.sse_cpu_ms_per_1000_events",
    "ws_over_sse": "ws_vs_sse.websocket_over_sse",
    "ws_long_cpu_per_1000": "ws_vs_sse_long.websocket_cpu_ms_per_1000_events",
    "ws_long_sse_cpu_per_1000": "ws_vs_sse_long.sse_cpu_ms_per_1000_events",
    "ws_long_over_sse": "ws_vs_sse_long.websocket_over_sse",
}
# Figures whose ratio against another system means nothing (they are already a ratio, or the other side of one)
_OWN_RATIO = {"ws_over_sse", "ws_long_over_sse"}


def _system_facts(report: dict[str, Any], name: str) -> tuple[bool, str]:
    """(is it a gateway, why it has no WebSocket mode or ""): from the report, or for a report written before it
    recorded them, from benchmarks/board_systems.py's description of the system."""
    recorded = report.get("systems", {}).get(name, {})
    known = None
    if "gateway" not in recorded or "no_websocket" not in recorded:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from board_systems import SYSTEMS

        known = SYSTEMS.get(name)
    gateway = recorded.get("gateway", known.gateway if known else True)
    no_websocket = recorded.get("no_websocket", known.no_websocket if known else "no WebSocket mode")
    return bool(gateway), str(no_websocket)


def why_not(report: dict[str, Any], name: str) -> dict[str, str]:
    """Per measure a system cannot take: the reason, as the tables print it (``n/a (reason)``)."""
    gateway, no_websocket = _system_facts(report, name)
    out: dict[str, str] = {}
    if not gateway:
        for measure in ("json", "check_cut", "resume"):
            out[measure] = "not a gateway: one pre-encoded answer, no upstream"
    if no_websocket:
        for measure in ("ws", "idle_ws", "active_websocket"):
            out[measure] = no_websocket
    if gateway and not name.startswith("respstream"):
        out["resume"] = "no stream resume"
    suite = report.get("compliance", {}).get(name, {})
    if suite and suite.get("score") is None:
        out["suite"] = str(suite.get("reason", "no score"))
    return out


def summarize(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per system: each figure's median over the repeats, and the within-repeat ratios' medians."""
    out: dict[str, dict[str, Any]] = {}
    rounds: list[dict[str, Any]] = report.get("rounds", [])
    order = list(report.get("systems", {}))
    names = sorted({name for rows in rounds for name in rows}, key=lambda n: order.index(n) if n in order else 99)
    for name in names:
        row: dict[str, Any] = {}
        for key, path in FIGURES.items():
            values = [v for rows in rounds if name in rows for v in [_get(rows[name], path)] if v is not None]
            row[key] = round(statistics.median(values), 3) if values else None
            for peer in ("respstream", "floor"):
                ratios = []
                for rows in rounds:
                    mine = _get(rows.get(name, {}), path)
                    theirs = _get(rows.get(peer, {}), path)
                    if mine is not None and theirs:
                        ratios.append(mine / theirs)
                if ratios and peer != name and key not in _OWN_RATIO:
                    row[f"{key}_vs_{peer}"] = round(statistics.median(ratios), 2)
        memory = report.get("memory", {}).get(name, {})
        row["idle_sse"] = memory.get("sse")
        row["idle_websocket"] = memory.get("websocket")
        row["idle_sse_kib"] = (memory.get("sse") or {}).get("kib_per_connection")
        row["idle_ws_kib"] = (memory.get("websocket") or {}).get("kib_per_connection")
        for side in ("sse", "websocket"):
            row[f"active_{side}"] = memory.get(f"{side}_active")
        checks = report.get("correctness", {}).get(name, {})
        for kind in ("normal", "cut"):
            row[f"check_{kind}"] = checks.get(kind, {}).get("violations")
            row[f"check_{kind}_codes"] = checks.get(kind, {}).get("codes")
        row["suite"] = report.get("compliance", {}).get(name, {}).get("score")
        row["resume"] = report.get("resume") if name == "respstream" else None
        row["gateway"], row["no_websocket"] = _system_facts(report, name)
        row["why_not"] = why_not(report, name)
        # Measures the system can take that the board takes on another one only
        row["not_measured"] = ({"resume": "the board resumes on respstream's chat bridge; the same store code"}
                               if name.startswith("respstream-") else {})
        out[name] = row
    return out


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}{suffix}"
    return f"{value}{suffix}"


def _whole(value: float | None) -> str:
    return "-" if value is None else f"{round(value):,}"


def _cell(s: dict[str, Any], measure: str, text: str | None) -> str:
    """``text`` when measured; else why the system cannot take the measure, or that this run has no figure."""
    why = s["why_not"].get(measure)
    if why:
        return f"n/a ({why})"
    if text is None and measure in s["not_measured"]:
        return f"not measured ({s['not_measured'][measure]})"
    return NOT_RUN if text is None else text


def _pair(s: dict[str, Any], p50: str, p99: str) -> str | None:
    return None if s[p50] is None else f"{_fmt(s[p50])} / {_fmt(s[p99])}"


def _skipped_rows(report: dict[str, Any], columns: int) -> list[str]:
    return [f"| {name} | skipped: {why} |" + " |" * (columns - 1)
            for name, why in report.get("skipped", {}).items()]


def speed_table(report: dict[str, Any], summary: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| system | added last byte, 1 client p50 / p99 ms (x respstream) | first event p50 ms | non-streaming "
        "p50 / p99 ms | added last byte, 64 clients p50 / p99 ms | CPU ms / 1,000 events, 10-delta responses "
        "(x floor, x respstream) | events/s | CPU ms / 1,000 events, 200-delta responses (x floor, x respstream) "
        "| events/s |",
        "|---|---|---:|---|---|---|---:|---|---:|",
    ]
    for name, s in summary.items():
        one = _pair(s, "stream_1_p50", "stream_1_p99")
        cells = [
            None if one is None else f"{one} ({_fmt(s.get('stream_1_p50_vs_respstream'), 'x')})",
            None if s["first_1_p50"] is None else _fmt(s["first_1_p50"]),
            _cell(s, "json", _pair(s, "json_1_p50", "json_1_p99")),
            _pair(s, "stream_64_p50", "stream_64_p99"),
            None if s["cpu_per_1000"] is None else f"{_fmt(s['cpu_per_1000'])} "
            f"({_fmt(s.get('cpu_per_1000_vs_floor'), 'x')}, {_fmt(s.get('cpu_per_1000_vs_respstream'), 'x')})",
            None if s["events_per_s"] is None else _whole(s["events_per_s"]),
            None if s["cpu_long_per_1000"] is None else f"{_fmt(s['cpu_long_per_1000'])} "
            f"({_fmt(s.get('cpu_long_per_1000_vs_floor'), 'x')}, "
            f"{_fmt(s.get('cpu_long_per_1000_vs_respstream'), 'x')})",
            None if s["events_long_per_s"] is None else _whole(s["events_long_per_s"]),
        ]
        lines.append(f"| {name} | " + " | ".join(NOT_RUN if c is None else c for c in cells) + " |")
    return lines + _skipped_rows(report, 8)


def _kib(measured: dict[str, Any] | None) -> str | None:
    """KiB per connection (MiB per 1,000), and how many of the held connections failed or were not active."""
    if not measured:
        return None
    kib = float(measured["kib_per_connection"])
    text = f"{kib:,.1f} ({kib * 1000 / 1024:,.1f} MiB)"
    if "active" in measured:
        short = measured["connections"] - measured["active"]
        if short:
            text += f", {short} of {measured['connections']} not active ({measured.get('failures', 0)} failed)"
    elif measured.get("failures"):
        text += f", {measured['failures']} of {measured['connections']} failed"
    if not measured.get("websocket") and measured.get("no_byte_yet"):
        text += f", {measured['no_byte_yet']} without a byte yet"
    return text


def memory_table(report: dict[str, Any], summary: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["", "RSS per connection, the server's process tree, KiB per connection (MiB per 1,000 in brackets): "
             "idle (1,000 held, the upstream quiet after one frame; WebSocket: 1,000 connections, no request) and "
             "ACTIVE (1,000 streams in flight, the upstream dripping a frame every 0.5 s; "
             "benchmarks/board_active_memory.py):", "",
             "| system | idle SSE | idle WebSocket | active SSE | active WebSocket |", "|---|---:|---:|---:|---:|"]
    for name, s in summary.items():
        cells = [_cell(s, "idle_sse", _kib(s["idle_sse"])), _cell(s, "idle_ws", _kib(s["idle_websocket"])),
                 _cell(s, "active_sse", _kib(s["active_sse"])),
                 _cell(s, "active_websocket", _kib(s["active_websocket"]))]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines + _skipped_rows(report, 4)


def transport_table(report: dict[str, Any], summary: dict[str, dict[str, Any]]) -> list[str]:
    """WebSocket vs SSE per event: per system, the server's CPU per 1,000 events for the same responses over
    WebSocket sessions and over keep-alive SSE on the same instance (benchmarks/board_websocket.py), with the median
    of the per-pair ratios; a system without a Responses WebSocket mode says so."""
    lines = ["", "WebSocket vs SSE per event (the same responses, the same instance, sides alternated; CPU ms per "
             "1,000 events, WebSocket / SSE, and the median of the within-pair ratios WebSocket/SSE):", "",
             "| system | 10-delta responses: WS / SSE ms (WS/SSE) | 200-delta responses: WS / SSE ms (WS/SSE) |",
             "|---|---|---|"]
    for name, s in summary.items():
        cells = [_cell(s, "ws", None if s[f"{k}cpu_per_1000"] is None else
                       f"{_fmt(s[f'{k}cpu_per_1000'])} / {_fmt(s[f'{k}sse_cpu_per_1000'])} "
                       f"(**{_fmt(s[f'{k}over_sse'], 'x')}**)") for k in ("ws_", "ws_long_")]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines + _skipped_rows(report, 2)


def _check(s: dict[str, Any], kind: str) -> str | None:
    violations = s[f"check_{kind}"]
    if violations is None:
        return None
    return f"{violations} ({', '.join(s[f'check_{kind}_codes'] or []) or 'ok'})"


def correctness_table(report: dict[str, Any], summary: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["", "Correctness and resume: `respstream check` violations on one captured stream, normal and with the "
             "upstream cut mid-stream; the public Open Responses suite's score (how each system met it: the list "
             "below); resume on another instance, first event p50 / p99 ms:", "",
             "| system | check: normal | check: upstream cut | Open Responses suite | resume p50 / p99 ms |",
             "|---|---|---|---|---|"]
    for name, s in summary.items():
        resume = s["resume"]
        resumed = None if not resume else (f"{_fmt(resume['first_event_p50_ms'])} / "
                                           f"{_fmt(resume['first_event_p99_ms'])}")
        cells = [_cell(s, "check_normal", _check(s, "normal")), _cell(s, "check_cut", _check(s, "cut")),
                 _cell(s, "suite", s["suite"]), _cell(s, "resume", resumed)]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines + _skipped_rows(report, 4)


def table(report: dict[str, Any]) -> str:
    summary = summarize(report)
    lines = speed_table(report, summary)
    lines += memory_table(report, summary)
    lines += transport_table(report, summary)
    lines += correctness_table(report, summary)
    lines += suite_notes(report.get("compliance", {}))
    resume = report.get("resume")
    if resume:
        lines += ["", f"Resume on another instance (respstream only; two instances sharing a SQLite store, "
                  f"`GET /v1/responses/{{id}}?stream=true&starting_after={resume['after']}` on the second for a "
                  f"response made on the first): first event **{_fmt(resume['first_event_p50_ms'])} ms p50, "
                  f"{_fmt(resume['first_event_p99_ms'])} ms p99** ({resume['resumed']} of {resume['rounds']} "
                  f"resumed; errors {resume['errors'] or 'none'})."]
    return "\n".join(lines)


def suite_notes(compliance: dict[str, dict[str, Any]]) -> list[str]:
    """Under the table: how each system met the suite, and which tests failed (WebSocket ones counted together)."""
    if not compliance:
        return []
    lines = ["", "Open Responses suite (public, 17 tests; benchmarks/board_compliance.py, every system in front of a "
             "SIMULATED upstream, HTTP and WebSocket tests each against a fresh process):"]
    for name, result in compliance.items():
        if result.get("score") is None:
            lines.append(f"- {name}: n/a ({result.get('reason')})")
            continue
        failed = list(result.get("failed") or {})
        websocket = [t for t in failed if t.startswith("websocket-")]
        http = [t for t in failed if not t.startswith("websocket-")]
        parts = ([f"{len(websocket)} WebSocket tests"] if websocket else []) + http
        failing = f"; failed: {', '.join(parts)}" if parts else ""
        if http:
            failing += f" (first error of {http[0]}: {_one_line(result['failed'][http[0]])})"
        elif websocket:
            failing += f" (first error of {websocket[0]}: {_one_line(result['failed'][websocket[0]])})"
        exited = f"; {'; '.join(result['exited'])}" if result.get("exited") else ""
        lines.append(f"- {name} **{result['score']}** ({result.get('how', '')}{failing}{exited}).")
    return lines


def _one_line(text: str) -> str:
    return " ".join(text.split())[:110].replace("|", "/")


def write_outputs(report: dict[str, Any], stem: Path, *, plots: bool = False) -> str:
    """The Markdown tables (also written beside the JSON); with ``plots`` the PNGs under docs/img."""
    text = table(report)
    stem.with_suffix(".md").write_text(text + "\n")
    if plots:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from board_plots import draw_plots

        report["plots"] = [p.name for p in draw_plots(report, summarize(report), "board")]
    return text


def update_docs(report: dict[str, Any], text: str, docs: Path, docs_json: str = "board-results.json", *,
                write_json: bool = True) -> None:
    """Replace the board section of docs/benchmarks.md (between the markers) with this run's tables (the run's JSON
    is written beside it as ``docs_json`` unless ``write_json`` is false: a report read back from that file)."""
    if write_json:
        (docs.parent / docs_json).write_text(json.dumps(report, indent=1) + "\n")
    machine, versions = report.get("machine", {}), report.get("versions", {})
    section = "\n".join([
        START,
        f"Run {report.get('started')} to {report.get('finished')} on {machine.get('cpu')} "
        f"({machine.get('cores')} cores, shared with other jobs; load average at the end "
        f"{machine.get('load_average_at_end')}), Python {machine.get('python')}, Node {machine.get('node')}. "
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".",
        "",
        text,
        "",
        *(f"![{p}](img/{p})" for p in report.get("plots", [])),
        "",
        f"The JSON of this run: [{docs_json}]({docs_json}).",
        END,
    ])
    current = docs.read_text()
    if START in current and END in current:
        head, rest = current.split(START, 1)
        current = head + section + rest.split(END, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + section + "\n"
    docs.write_text(current)
