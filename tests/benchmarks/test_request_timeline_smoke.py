"""benchmarks/request_timeline.py runs: a seconds-long pass of a few requests (it says the hooked gateway still
starts, every timeline point is still stamped, and the table still prints; not how long anything takes)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POINTS = ("client connects", "accepted", "head parsed", "body read", "app entered", "route entered", "authenticated",
          "body decoded", "validated", "record created", "upstream request written", "response head written",
          "first event written", "client first event", "upstream first bytes", "upstream body end",
          "terminal written", "last byte written", "client last byte", "store write", "connection closed", "metrics",
          "access log")


def test_request_timeline_stamps_every_point() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "request_timeline.py"), "--requests", "8",
                           "--warmup", "2"], cwd=ROOT, capture_output=True, timeout=120, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    rows = dict(re.findall(r"^\| ([a-z ]+) \| (-?\d+) \|", out, re.MULTILINE))
    assert set(rows) == set(POINTS), out
    assert int(rows["accepted"]) == 0 and int(rows["client connects"]) < 0, out
    # the server's points of a request come in the order they happen (p50 of 8 requests)
    assert int(rows["head parsed"]) < int(rows["route entered"]) < int(rows["record created"]) < \
        int(rows["first event written"]) < int(rows["last byte written"]) <= int(rows["access log"]), out
    assert re.search(r"^socket writes a request: \d+-\d+ \(median \d+\); 8 requests$", out, re.MULTILINE), out
    assert re.search(r"^  write 1 to the client: p50 [\d.]+ µs", out, re.MULTILINE), out
    assert re.search(r"^  the write to the upstream: p50 [\d.]+ µs, p99 [\d.]+ µs \(8 writes\)$", out,
                     re.MULTILINE), out
