"""benchmarks/event_cpu.py runs: a seconds-long pass with a tiny load (it says the script still starts the floor and
the chat bridge, loads both response lengths and reports, not how fast anything is)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_event_cpu_runs_and_reports_every_system() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "event_cpu.py"), "--repeat", "1", "--requests",
                           "4", "--short-requests", "4", "--clients", "2", "--time", "20"],
                          cwd=ROOT, capture_output=True, timeout=240, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    for name in ("floor", "respstream"):
        for variant in ("long", "normal"):
            line = re.search(rf"^\[1/1\] {name} {variant}: (.*)$", out, re.MULTILINE)
            assert line is not None, out
            assert '"ok": 4' in line.group(1) and '"errors": {}' in line.group(1), line.group(1)
        assert re.search(rf"^{name}: CPU ms / 1,000 events on 200-delta responses .*µs an event", out,
                         re.MULTILINE), out
    # 200-delta responses: 207 events each (created, routing, item and part added, 200 deltas, the closing events,
    # completed); 10-delta ones 17.
    assert '"events_per_request": 207.0' in out and '"events_per_request": 17.0' in out
