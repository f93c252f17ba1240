"""Plot events/s vs concurrent streams from benchmarks/server_throughput.py's JSON (PNG).

Usage: ``.venv/bin/python benchmarks/plot_server.py [RESULTS.json] [--out docs/img/server_throughput.png]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

LABELS = {
    "floor": "uvicorn + Starlette StreamingResponse (floor)",
    "sse-starlette": "sse-starlette EventSourceResponse",
    "gateway": "respstream gateway, scripted:200 (in-process, SIMULATED)",
    "gateway-http": "respstream gateway via fake Chat Completions upstream (SIMULATED)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description="plot server throughput results")
    parser.add_argument("results", nargs="?", default="/tmp/server_throughput.json")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs/img/server_throughput.png"))
    args = parser.parse_args()
    report = json.loads(Path(args.results).read_text())
    if len(report["levels"]) == 1:
        return bars(report, args.out)
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for kind, rows in report["servers"].items():
        xs = [r["concurrency"] for r in rows]
        ys = [r["events_per_s"] for r in rows]
        style = "--" if kind == "gateway-http" else "-"
        ax.plot(xs, ys, style, marker="o", label=LABELS.get(kind, kind))
        for x, y, r in zip(xs, ys, rows, strict=True):
            if r["errors"]:
                ax.annotate(f"{sum(r['errors'].values())} errors", (x, y), textcoords="offset points", xytext=(4, 6),
                            fontsize=7)
    ax.set_xscale("log")
    ax.set_xticks(report["levels"], [f"{n:,}" for n in report["levels"]])
    ax.set_xlabel("concurrent streams")
    ax.set_ylabel("events/s (server on 1 core)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"SSE server throughput, {report['events_per_request']} events per response")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out)
    print(args.out)
    return 0


def bars(report: dict[str, Any], out: str) -> int:
    """One concurrency level: events/s and server CPU per event, one bar per server."""
    level = report["levels"][0]
    kinds = [k for k, rows in report["servers"].items() if rows]
    eps = [report["servers"][k][0]["events_per_s"] for k in kinds]
    cpu = [report["servers"][k][0].get("cpu_us_per_event") or 0 for k in kinds]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8), dpi=110)
    left.barh(kinds, eps, color="tab:blue")
    left.set_xlabel(f"events/s at {level} streams")
    left.invert_yaxis()
    right.barh(kinds, cpu, color="tab:orange")
    spread = max(cpu) / min((c for c in cpu if c), default=1.0) if any(cpu) else 1.0
    if spread > 20:  # LiteLLM's ~100x would flatten every other bar; a log axis from a small spread exaggerates it
        right.set_xlabel("server CPU per event (us, log scale)")
        right.set_xscale("log")
    else:
        right.set_xlabel("server CPU per event (us)")
    right.invert_yaxis()
    right.set_yticklabels([])
    for ax in (left, right):
        ax.grid(True, axis="x", alpha=0.3)
    runs = len(report["servers"][kinds[0]][0].get("events_per_s_runs") or [1])
    fig.suptitle(f"SSE server throughput, {report['events_per_request']} events per response, "
                 + ("one run" if runs == 1 else f"the median of {runs} runs"))
    fig.tight_layout()
    fig.savefig(out)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
