"""What the page's main thread cost, in CPU time, read from a Chromium trace (load-independent responsiveness).

A frame gap measured with ``requestAnimationFrame`` is wall time: on a busy machine the renderer is descheduled and
every gap grows, whatever the page does. Chromium's trace gives each main-thread task its thread CPU time
(``tdur``), which other processes cannot inflate. Two measures follow: the longest task (a long task blocks input
and frames) and the most main-thread CPU spent between two consecutive animation frames (many short tasks that
starve rendering show here even when none is long). The page must keep a ``requestAnimationFrame`` loop running so
that frames are produced (and traced) whenever the main thread lets them.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["CATEGORIES", "MainThreadCPU", "main_thread_cpu"]

# toplevel: the scheduler's RunTask events (with tdur); devtools.timeline: FireAnimationFrame.
CATEGORIES = ["toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline"]
_TASK = "ThreadControllerImpl::RunTask"  # one per task the main thread's scheduler runs (RunTask nests inside it)


@dataclass(frozen=True)
class MainThreadCPU:
    longest_task_ms: float
    longest_between_frames_ms: float
    tasks: int
    frames: int


def main_thread_cpu(raw_trace: bytes) -> MainThreadCPU:
    """The renderer main thread's CPU figures from ``browser.stop_tracing()``'s bytes (see the module docstring)."""
    trace: Any = json.loads(raw_trace)
    events: list[dict[str, Any]] = trace["traceEvents"] if isinstance(trace, dict) else trace
    main = {(e["pid"], e["tid"]) for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"}
    mine = [e for e in events if (e.get("pid"), e.get("tid")) in main]
    tasks = [e for e in mine if e.get("ph") == "X" and e.get("name") == _TASK and "tdur" in e]
    frames = sorted(e["ts"] for e in mine if e.get("name") == "FireAnimationFrame")
    between = [0.0] * (len(frames) + 1)
    for task in tasks:
        between[bisect.bisect_right(frames, task["ts"])] += task["tdur"]
    return MainThreadCPU(
        longest_task_ms=max((t["tdur"] for t in tasks), default=0) / 1000,
        longest_between_frames_ms=max(between) / 1000,
        tasks=len(tasks),
        frames=len(frames),
    )
