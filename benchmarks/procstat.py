"""What a server process tree did during a load level, from /proc: CPU time, read and write calls, its core's idle time.

The read and write counts are the kernel's ``syscr`` / ``syscw`` from ``/proc/PID/io``: read(2)/readv(2) and
write(2)/writev(2) family calls. uvloop (libuv) reads and writes sockets with exactly those; asyncio's selector loop
uses recv(2)/send(2), which those counters do not see, so a caller must not quote the counts for a pure-asyncio stack.

The core's idle share says whether the server was the bottleneck: a pinned server whose core idles for a good part of
a load level was waiting for its peers (load generator, upstream), and its CPU per event is then not its cost at
saturation (fewer events per wake-up, so more CPU per event than at full load).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    cpu_s: float  # user + system CPU seconds of the process tree
    read_calls: int  # syscr summed over the tree
    write_calls: int  # syscw summed over the tree
    # The sampled core's clock ticks, idle + iowait and all, (0, 0) when no core was given: integers, so a
    # difference of two samples is exact (seconds since boot as floats lose the last tick's worth in subtraction).
    core_idle_ticks: int
    core_total_ticks: int

    def since(self, before: Sample) -> Sample:
        return Sample(self.cpu_s - before.cpu_s, self.read_calls - before.read_calls,
                      self.write_calls - before.write_calls, self.core_idle_ticks - before.core_idle_ticks,
                      self.core_total_ticks - before.core_total_ticks)

    def core_idle_pct(self) -> float | None:
        """Idle share of the core over the interval this difference covers (None without a core)."""
        return 100 * self.core_idle_ticks / self.core_total_ticks if self.core_total_ticks > 0 else None


def process_tree(pid: int) -> set[int]:
    """``pid`` and every live descendant."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # exited while we looked
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of proc(5))


def _io_calls(pid: int) -> tuple[int, int]:
    values = dict(line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines() if ": " in line)
    return int(values["syscr"]), int(values["syscw"])


def core_ticks(core: int) -> tuple[int, int]:
    """(idle + iowait, total) clock ticks of ``core`` since boot, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name == f"cpu{core}":
            values = [int(t) for t in ticks[:8]]  # user nice system idle iowait irq softirq steal
            return values[3] + values[4], sum(values)
    raise ValueError(f"no cpu{core} line in /proc/stat")


def sample(pid: int, core: int | None = None) -> Sample:
    """Counters of ``pid``'s tree now, and of ``core`` when given."""
    cpu, reads, writes = 0.0, 0, 0
    for member in process_tree(pid):
        try:
            used, (r, w) = cpu_seconds(member), _io_calls(member)
        except (OSError, KeyError, IndexError, ValueError):
            continue  # a worker that exited between the listing and the read
        cpu, reads, writes = cpu + used, reads + r, writes + w
    idle, total = core_ticks(core) if core is not None else (0, 0)
    return Sample(cpu, reads, writes, idle, total)
