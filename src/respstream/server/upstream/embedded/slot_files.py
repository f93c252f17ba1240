"""The saved llama.cpp slot states on disk: ``<name>.bin`` (written by llama.cpp's slot save) beside ``<name>.json``
(our metadata: the prompt's block chain, tokens, key, last use). Blocking file IO: callers run it in a worker thread.

A ``.json`` is written (atomically: a temporary file renamed over it) only after llama.cpp has written its ``.bin``,
so a ``.json`` always names a whole file. What a crash leaves behind (a ``.bin`` without metadata, a damaged
``.json``) is removed by :func:`load_saved` once it is older than :data:`ORPHAN_SECONDS` (younger, another gateway
process on the same directory may be writing it right now).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from respstream.server.upstream.embedded.prefix_index import SavedPrefix

__all__ = ["ORPHAN_SECONDS", "load_saved", "remove_saved", "write_meta"]

ORPHAN_SECONDS = 600.0
log = logging.getLogger("respstream.server.upstream")


def _entry(meta: object, name: str, size: int) -> SavedPrefix | None:
    if not isinstance(meta, dict):
        return None
    chain, tokens, key, used_at = meta.get("chain"), meta.get("tokens"), meta.get("key"), meta.get("used_at")
    if not (isinstance(chain, list) and chain and all(isinstance(h, str) for h in chain)):
        return None
    if not isinstance(tokens, int) or tokens < 1 or not isinstance(used_at, int | float):
        return None
    return SavedPrefix(name=name, chain=chain, tokens=tokens, size=size,
                       key=key if isinstance(key, str) else None, used_at=float(used_at))


def load_saved(directory: Path) -> list[SavedPrefix]:
    """Every whole saved state in ``directory`` (created when missing); old leftovers are deleted."""
    directory.mkdir(parents=True, exist_ok=True)
    now = time.time()
    found: list[SavedPrefix] = []
    for path in directory.iterdir():
        if path.suffix not in (".bin", ".json", ".tmp"):
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        stale = now - stat.st_mtime > ORPHAN_SECONDS
        if path.suffix == ".tmp":
            if stale:
                path.unlink(missing_ok=True)
            continue
        if path.suffix == ".bin":
            if stale and not path.with_suffix(".json").exists():
                path.unlink(missing_ok=True)
            continue
        binary = path.with_suffix(".bin")
        try:
            entry = _entry(json.loads(path.read_text("utf-8")), path.stem, binary.stat().st_size)
        except (OSError, ValueError):
            entry = None
        if entry is None:
            if stale:
                log.warning("prefix cache: removing unreadable saved state %s", path)
                remove_saved(directory, path.stem)
            continue
        found.append(entry)
    return found


def write_meta(directory: Path, entry: SavedPrefix) -> None:
    """Write ``entry``'s metadata beside its ``.bin`` (atomically)."""
    meta = {"chain": entry.chain, "tokens": entry.tokens, "key": entry.key, "used_at": entry.used_at}
    temporary = directory / f"{entry.name}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(meta), "utf-8")
    os.replace(temporary, directory / f"{entry.name}.json")


def remove_saved(directory: Path, name: str) -> None:
    """Delete a saved state (metadata first, so a reader never sees metadata without its file)."""
    (directory / f"{name}.json").unlink(missing_ok=True)
    (directory / f"{name}.bin").unlink(missing_ok=True)
