"""What the live suite shows: progress on stderr while it runs, then a summary table or the JSON report.

On a terminal each scenario gets a spinner line that turns into its result; elsewhere (CI logs, pipes) one plain line
when a scenario starts and one when it ends, so a hang is visible in a log too.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Final, TextIO

from respstream.conformance.outcome import ScenarioResult

__all__ = ["Progress", "summary_table", "to_json"]

SPINNER: Final = "|/-\\"
MARKS: Final = {"passed": "ok", "violations": "!!", "unsupported": "--", "failed": "XX"}


class Progress:
    """Progress display. ``start(name)`` before a scenario, ``finish(result)`` after it, ``close()`` at the end."""

    def __init__(self, stream: TextIO, total: int, *, interactive: bool | None = None) -> None:
        self._stream = stream
        self._total = total
        self._index = 0
        self._interactive = stream.isatty() if interactive is None else interactive
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, name: str) -> None:
        self._index += 1
        label = f"[{self._index}/{self._total}] {name}"
        if not self._interactive:
            self._write(f"{label} ...\n")
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._spin, args=(label,), daemon=True)
        self._thread.start()

    def finish(self, result: ScenarioResult) -> None:
        label = f"[{self._index}/{self._total}] {result.name}"
        line = f"{label}: {result.result} ({result.seconds:.2f} s)"
        if result.violations:
            line += f", {len(result.violations)} violations"
        if result.detail:
            line += f" - {result.detail}"
        if self._interactive:
            self._halt()
            self._write(f"\r\x1b[2K{MARKS[result.result]} {line}\n")
        else:
            self._write(line + "\n")

    def close(self) -> None:
        self._halt()

    def _spin(self, label: str) -> None:
        tick = 0
        while not self._stop.is_set():
            self._write(f"\r\x1b[2K{SPINNER[tick % len(SPINNER)]}  {label} ...")
            tick += 1
            self._stop.wait(0.1)

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _write(self, text: str) -> None:
        with self._lock:
            self._stream.write(text)
            self._stream.flush()


def to_json(endpoint: str, results: list[ScenarioResult]) -> dict[str, Any]:
    """The ``check --url --json`` object (DESIGN §3)."""
    return {
        "schema_version": 1,
        "endpoint": endpoint,
        "ok": all(r.result in ("passed", "unsupported") for r in results),
        "scenarios": [r.to_json() for r in results],
    }


def summary_table(endpoint: str, results: list[ScenarioResult]) -> str:
    """A plain-text table: one row per scenario, then the violations grouped by code."""
    rows = [("scenario", "result", "violations", "time", "detail")]
    for r in results:
        detail = r.detail if len(r.detail) <= 90 else r.detail[:87] + "..."
        rows.append((r.name, r.result, str(len(r.violations)), f"{r.seconds:.2f}s", detail))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"respstream check {endpoint}", ""]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(4)]
        lines.append("  ".join([*cells, row[4]]).rstrip())
    codes = Counter(v["code"] for r in results for v in r.violations)
    if codes:
        lines += ["", "violations by code:"]
        lines += [f"  {code}: {count}" for code, count in sorted(codes.items())]
    counts = Counter(r.result for r in results)
    verdict = "OK" if to_json(endpoint, results)["ok"] else "NOT OK"
    tally = ", ".join(f"{counts[k]} {k}" for k in ("passed", "violations", "unsupported", "failed") if counts[k])
    lines += ["", f"{verdict}: {tally}"]
    slow = [r.name for r in results if r.timed_out]
    if slow:
        lines.append(f"{len(slow)} scenario(s) timed out ({', '.join(slow)}): a slow or busy server may need more time "
                     "per scenario; rerun with --timeout SECONDS")
    return "\n".join(lines)
