"""One live process per instance id: an exclusive ``flock`` on ``<data dir>/instance-<id>.lock``.

Why: startup recovery ends every unfinished log recorded under this instance's id with ``worker_lost``. A second
``serve`` with the same id (the same command started twice) used to run that recovery against the live instance's
work before failing to bind. ``serve`` now binds first and then takes this lock; a second process finds it held and
exits (one line, status 2) having touched nothing. The kernel drops the lock when the process dies, even by
``kill -9``, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["InstanceLock", "InstanceLocked", "lock_instance"]


class InstanceLocked(RuntimeError):
    """Another live process holds this instance id. The message names the id, the lock file and its pid."""


class InstanceLock:
    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


def lock_instance(data_dir: Path, instance_id: str) -> InstanceLock:
    """Take the lock for ``instance_id`` or raise :class:`InstanceLocked`. When the data dir cannot be written the
    lock is skipped (an id that cannot be persisted there is not shared through it either)."""
    path = data_dir / f"instance-{instance_id.replace('/', '_')}.lock"
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return InstanceLock(-1, path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise InstanceLocked(
            f"another gateway with instance id {instance_id!r} is running (pid {holder}; lock {path}); "
            "give each instance its own port, data_dir or instance_id"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return InstanceLock(fd, path)
