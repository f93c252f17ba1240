"""The board's report: per-system figures (median over repeats), ratios taken within each repeat against respstream
and the floor (then their median), a Markdown table, matplotlib PNGs, and the docs/benchmarks.md section."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

__all__ = ["draw_plots", "suite_notes", "summarize", "table", "transport_table", "update_docs", "write_outputs"]

START, END = "<!-- board:start -->", "<!-- board:end -->"
IMG = Path(__file__).resolve().parent.parent / "docs" / "img"


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


def summarize(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per system: each figure's median over the repeats, and the within-repeat ratios' medians."""
    out: dict[str, dict[str, Any]] = {}
    rounds: list[dict[str, Any]] = report.get("rounds", [])
    names = sorted({name for rows in rounds for name in rows}, key=list(report.get("systems", {})).index)
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
        row["idle_sse_kib"] = memory.get("sse", {}).get("kib_per_connection")
        row["idle_ws_kib"] = memory.get("websocket", {}).get("kib_per_connection")
        for side in ("sse", "websocket"):
            row[f"active_{side}"] = memory.get(f"{side}_active")
        checks = report.get("correctness", {}).get(name, {})
        row["check_normal"] = checks.get("normal", {}).get("violations")
        row["check_cut"] = checks.get("cut", {}).get("violations")
        row["check_cut_codes"] = checks.get("cut", {}).get("codes")
        row["suite"] = report.get("compliance", {}).get(name, {}).get("score")
        row["no_websocket"] = report.get("systems", {}).get(name, {}).get("no_websocket", "no WebSocket mode")
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


def table(report: dict[str, Any]) -> str:
    summary = summarize(report)
    lines = [
        "| system | added last byte, 1 client p50 / p99 ms (x respstream) | first event p50 ms | non-streaming "
        "p50 / p99 ms | added last byte, 64 clients p50 / p99 ms | CPU ms / 1,000 events, 10-delta responses "
        "(x floor, x respstream) | events/s | CPU ms / 1,000 events, 200-delta responses (x floor, x respstream) "
        "| events/s | idle SSE KiB / conn | idle WS KiB / conn | check: normal / cut violations "
        "| Open Responses suite |",
        "|---|---|---:|---|---|---|---:|---|---:|---:|---:|---|---|",
    ]
    for name, s in summary.items():
        cut = "-" if s["check_cut"] is None else f"{s['check_cut']} ({', '.join(s['check_cut_codes'] or []) or 'ok'})"
        lines.append(
            f"| {name} | {_fmt(s['stream_1_p50'])} / {_fmt(s['stream_1_p99'])} "
            f"({_fmt(s.get('stream_1_p50_vs_respstream'), 'x')}) | {_fmt(s['first_1_p50'])} "
            f"| {_fmt(s['json_1_p50'])} / {_fmt(s['json_1_p99'])} | {_fmt(s['stream_64_p50'])} / "
            f"{_fmt(s['stream_64_p99'])} | {_fmt(s['cpu_per_1000'])} ({_fmt(s.get('cpu_per_1000_vs_floor'), 'x')}, "
            f"{_fmt(s.get('cpu_per_1000_vs_respstream'), 'x')}) | {_whole(s['events_per_s'])} "
            f"| {_fmt(s['cpu_long_per_1000'])} ({_fmt(s.get('cpu_long_per_1000_vs_floor'), 'x')}, "
            f"{_fmt(s.get('cpu_long_per_1000_vs_respstream'), 'x')}) | {_whole(s['events_long_per_s'])} "
            f"| {_fmt(s['idle_sse_kib'])} | {_fmt(s['idle_ws_kib'])} | {_fmt(s['check_normal'])} / {cut} "
            f"| {s['suite'] or 'n/a'} |")
    for name, why in report.get("skipped", {}).items():
        lines.append(f"| {name} | skipped: {why} | | | | | | | | | | | n/a |")
    lines += transport_table(summary)
    lines += suite_notes(report.get("compliance", {}))
    resume = report.get("resume")
    if resume:
        lines += ["", f"Resume on another instance (respstream only; two instances sharing a SQLite store, "
                  f"`GET /v1/responses/{{id}}?stream=true&starting_after={resume['after']}` on the second for a "
                  f"response made on the first): first event **{_fmt(resume['first_event_p50_ms'])} ms p50, "
                  f"{_fmt(resume['first_event_p99_ms'])} ms p99** ({resume['resumed']} of {resume['rounds']} "
                  f"resumed; errors {resume['errors'] or 'none'})."]
    return "\n".join(lines)


def transport_table(summary: dict[str, dict[str, Any]]) -> list[str]:
    """WebSocket vs SSE per event: per system, the server's CPU per 1,000 events for the same responses over
    WebSocket sessions and over keep-alive SSE on the same instance (benchmarks/board_websocket.py), with the median
    of the per-pair ratios; a system without a Responses WebSocket mode says so."""
    if not summary:
        return []
    lines = ["", "WebSocket vs SSE per event (the same responses, the same instance, sides alternated; CPU ms per "
             "1,000 events, WebSocket / SSE, and the median of the within-pair ratios WebSocket/SSE), and RSS per "
             "ACTIVE connection (streams in flight, the upstream dripping a frame every 0.5 s; KiB per connection, "
             "MiB per 1,000 in brackets; benchmarks/board_active_memory.py):", "",
             "| system | 10-delta responses: WS / SSE ms (WS/SSE) | 200-delta responses: WS / SSE ms (WS/SSE) "
             "| active SSE KiB / conn | active WS KiB / conn |",
             "|---|---|---|---:|---:|"]
    for name, s in summary.items():
        why = f"n/a ({s['no_websocket']})" if s.get("no_websocket") else ""
        cells = [why or f"{_fmt(s[f'{k}cpu_per_1000'])} / {_fmt(s[f'{k}sse_cpu_per_1000'])} "
                 f"(**{_fmt(s[f'{k}over_sse'], 'x')}**)" for k in ("ws_", "ws_long_")]
        cells += [_active(s.get("active_sse")), why or _active(s.get("active_websocket"))]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def _active(measured: dict[str, Any] | None) -> str:
    """KiB per active connection (MiB per 1,000), and how many of the held connections were not active."""
    if not measured:
        return "-"
    kib = float(measured["kib_per_connection"])
    text = f"{kib:,.1f} ({kib * 1000 / 1024:,.1f} MiB)"
    short = measured["connections"] - measured.get("active", 0)
    if short:
        text += f", {short} of {measured['connections']} not active ({measured.get('failures', 0)} failed)"
    return text


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


def _saved(plt: Any, fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def draw_plots(report: dict[str, Any], prefix: str) -> list[Path]:
    """Two PNGs: added latency (1 and 64 clients, p50 and p99) and CPU per 1,000 events, per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(report)
    names = list(summary)
    written = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (title, keys) in zip(axes, (("1 client", ("stream_1_p50", "stream_1_p99")),
                                         ("64 clients", ("stream_64_p50", "stream_64_p99"))), strict=True):
        width = 0.38
        for i, key in enumerate(keys):
            values = [summary[n][key] or 0 for n in names]
            ax.bar([x + i * width for x in range(len(names))], values, width, label=key.rsplit("_", 1)[1])
        ax.set_xticks([x + width / 2 for x in range(len(names))], names, rotation=25, ha="right")
        ax.set_ylabel("added latency to last byte, ms (log)")
        ax.set_yscale("log")
        ax.set_title(f"streaming, {title}")
        ax.legend()
    written.append(_saved(plt, fig, IMG / f"{prefix}_latency.png"))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.38
    for i, (key, label) in enumerate((("cpu_per_1000", "10-delta responses"),
                                      ("cpu_long_per_1000", "200-delta responses"))):
        ax.bar([x + i * width for x in range(len(names))], [summary[n][key] or 0 for n in names], width, label=label)
    ax.set_xticks([x + width / 2 for x in range(len(names))], names, rotation=25, ha="right")
    ax.set_ylabel("server CPU ms per 1,000 events (log)")
    ax.set_yscale("log")
    ax.set_title("CPU per 1,000 events, 64 streams")
    ax.legend()
    written.append(_saved(plt, fig, IMG / f"{prefix}_cpu.png"))
    return written


def write_outputs(report: dict[str, Any], stem: Path, *, plots: bool = False) -> str:
    """The Markdown table (also written beside the JSON); with ``plots`` the PNGs under docs/img."""
    text = table(report)
    stem.with_suffix(".md").write_text(text + "\n")
    if plots:
        report["plots"] = [p.name for p in draw_plots(report, "board")]
    return text


def update_docs(report: dict[str, Any], text: str, docs: Path, docs_json: str = "board-results.json") -> None:
    """Replace the board section of docs/benchmarks.md (between the markers) with this run's table (the run's JSON is
    written beside it as ``docs_json``)."""
    import json

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
