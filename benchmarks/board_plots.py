"""The board's PNGs under docs/img (matplotlib, drawn from benchmarks/board_report.py's summary):

- ``board_latency.png``: added latency to the last byte, streaming, 1 and 64 clients, p50 and p99;
- ``board_cpu.png``: server CPU per 1,000 events, 10-delta and 200-delta responses;
- ``board_memory.png``: RSS per connection, idle SSE, idle WebSocket, active SSE, active WebSocket; a measure the
  system cannot take is marked ``n/a`` where its bar would stand, one this run has no figure for ``-``;
- ``board_correctness.png``: the Open Responses suite's score (passed, failed HTTP tests, failed WebSocket tests),
  with the ``respstream check`` violations on the normal and the cut stream written beside each bar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["IMG", "draw_plots"]

IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
_MEMORY = (("idle_sse", "idle SSE"), ("idle_websocket", "idle WebSocket"), ("active_sse", "active SSE"),
           ("active_websocket", "active WebSocket"))
# summary key -> why_not key (board_report.why_not)
_MEMORY_WHY = {"idle_sse": "idle_sse", "idle_websocket": "idle_ws", "active_sse": "active_sse",
               "active_websocket": "active_websocket"}


def _saved(plt: Any, fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _plain(value: float) -> str:
    return f"{value:,.{0 if value >= 1 else 2}f}"


def _log_scale(ax: Any, values: list[float | None], label: str) -> None:
    """A log y axis when there is a positive value to show on it (an empty run's plot stays linear, and says so)."""
    if any(v for v in values):
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _plain(value)))  # 100, not 10^2
        # between the decades: 2 and 5 only (every minor tick labelled crowds an axis spanning decades)
        ax.yaxis.set_minor_formatter(FuncFormatter(
            lambda value, _: _plain(value) if f"{value:.0e}"[0] in "25" else ""))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_ylabel(f"{label} (log)")
    else:
        ax.set_ylabel(f"{label} (none in this run)")


def _latency(plt: Any, summary: dict[str, dict[str, Any]], path: Path) -> Path:
    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (title, keys) in zip(axes, (("1 client", ("stream_1_p50", "stream_1_p99")),
                                         ("64 clients", ("stream_64_p50", "stream_64_p99"))), strict=True):
        _paired_bars(ax, names, [(key.rsplit("_", 1)[1], [summary[n][key] for n in names]) for key in keys],
                     "added latency to last byte, ms")
        ax.set_title(f"streaming, {title}")
    return _saved(plt, fig, path)


def _cpu(plt: Any, summary: dict[str, dict[str, Any]], path: Path) -> Path:
    names = list(summary)
    fig, ax = plt.subplots(figsize=(8, 4))
    _paired_bars(ax, names, [(label, [summary[n][key] for n in names]) for key, label in (
        ("cpu_per_1000", "10-delta responses"), ("cpu_long_per_1000", "200-delta responses"))],
        "server CPU ms per 1,000 events")
    ax.set_title("CPU per 1,000 events, 64 streams")
    return _saved(plt, fig, path)


def _paired_bars(ax: Any, names: list[str], series: list[tuple[str, list[Any]]], ylabel: str) -> None:
    """Two bars a system (one per series, None drawn as 0), on the log axis, with the legend."""
    width = 0.38
    for i, (label, values) in enumerate(series):
        ax.bar([x + i * width for x in range(len(names))], [v or 0 for v in values], width, label=label)
    ax.set_xticks([x + width / 2 for x in range(len(names))], names, rotation=25, ha="right")
    _log_scale(ax, [v for _, values in series for v in values], ylabel)
    ax.legend()


def _memory(plt: Any, summary: dict[str, dict[str, Any]], path: Path) -> Path:
    names = list(summary)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.2
    values = [[(summary[n][key] or {}).get("kib_per_connection") for n in names] for key, _ in _MEMORY]
    floor = min((v for row in values for v in row if v), default=1.0) / 2  # where the n/a marks sit (log axis)
    for i, ((key, label), row) in enumerate(zip(_MEMORY, values, strict=True)):
        xs = [x + (i - 1.5) * width for x in range(len(names))]
        bars = ax.bar(xs, [v or 0 for v in row], width, label=label)
        for x, name, value, bar in zip(xs, names, row, bars, strict=True):
            if value:
                ax.annotate(f"{value:,.0f}", (x, value), ha="center", va="bottom", fontsize=7,
                            xytext=(0, 1), textcoords="offset points")
            else:  # n/a: the system cannot; "-": this run has no figure
                mark = "n/a" if _MEMORY_WHY[key] in summary[name]["why_not"] else "-"
                ax.text(x, floor, mark, ha="center", va="bottom", fontsize=8, rotation=90,
                        color=bar.get_facecolor())
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    _log_scale(ax, [v for row in values for v in row], "RSS KiB per connection")
    top = max((v for row in values for v in row if v), default=floor)
    ax.set_ylim(floor * 0.8, top * 1.6)  # room above the tallest bar for the legend
    ax.set_title("memory per connection: 1,000 idle or 1,000 active ('n/a': no such mode; '-': not in this run)")
    ax.legend(fontsize=8, ncols=4, loc="upper left")
    return _saved(plt, fig, path)


def _correctness(plt: Any, report: dict[str, Any], summary: dict[str, dict[str, Any]], path: Path) -> Path:
    names = list(summary)
    compliance = report.get("compliance", {})
    fig, ax = plt.subplots(figsize=(12, 0.55 * len(names) + 1.6))
    total = max((int(compliance.get(n, {}).get("total") or 0) for n in names), default=0) or 17
    labelled: set[str] = set()  # one legend entry a part
    for y, name in enumerate(names):
        result = compliance.get(name, {})
        s = summary[name]
        cut = "n/a" if "check_cut" in s["why_not"] else ("-" if s["check_cut"] is None else str(s["check_cut"]))
        if s["check_cut_codes"]:
            cut += f" ({', '.join(s['check_cut_codes'])})"
        checks = f"check: normal {'-' if s['check_normal'] is None else s['check_normal']}, cut {cut}"
        if result.get("score") is None:
            ax.text(0.2, y, f"suite n/a; {checks}", va="center", fontsize=8)
            continue
        failed = list(result.get("failed") or {})
        websocket = sum(t.startswith("websocket-") for t in failed)
        passed = int(result.get("passed") or 0)
        parts = ((passed, "passed", "tab:green"), (len(failed) - websocket, "failed: HTTP tests", "tab:red"),
                 (websocket, "failed: WebSocket tests", "tab:orange"))
        left = 0
        for width, label, color in parts:
            ax.barh(y, width, left=left, color=color, label=None if label in labelled else label)
            labelled.add(label)
            left += width
        ax.text(left + 0.2, y, f"{result['score']}; {checks}", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.4, -0.6)  # the first system on top, its text inside the axes
    ax.set_xlim(0, total * 2.0)
    ax.set_xlabel(f"Open Responses suite tests ({total})")
    ax.set_title("correctness: the public suite's score, and `respstream check` violations (normal / upstream cut)")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _saved(plt, fig, path)


def draw_plots(report: dict[str, Any], summary: dict[str, dict[str, Any]], prefix: str) -> list[Path]:
    """The four PNGs (module docstring), written to docs/img/``prefix``_*.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return [_latency(plt, summary, IMG / f"{prefix}_latency.png"), _cpu(plt, summary, IMG / f"{prefix}_cpu.png"),
            _memory(plt, summary, IMG / f"{prefix}_memory.png"),
            _correctness(plt, report, summary, IMG / f"{prefix}_correctness.png")]
