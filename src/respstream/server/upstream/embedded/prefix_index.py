"""Which prompt prefixes have a saved llama.cpp KV state, and which one a new prompt should start from. No IO.

How this works: a prompt (the text the model's chat template renders) is cut into blocks of :data:`BLOCK_CHARS`
characters and each whole block gets a hash chained on the one before (:func:`prefix_chain`), so ``chain[i]`` stands
for the whole text up to the end of block ``i``. Two prompts share their first ``n`` blocks exactly when their chains
agree at ``n - 1``; because of the chaining, agreement at ``i`` implies agreement before it, so the shared length is
found by binary search (:func:`common_blocks`): O(log n) per saved prefix, never a scan of the text.

:class:`PrefixIndex` holds the saved states (:class:`SavedPrefix`: a file of llama.cpp's slot save, the chain of the
prompt it holds, its tokens, bytes on disk, the ``prompt_cache_key`` that made it and when it was last used).
``best()`` finds the one sharing the most blocks with a prompt (same key first on a tie, then the most recent);
``add()`` drops the saved states the new one supersedes (its chain starts with theirs: restoring the longer one
serves them too); ``over_budget()`` names the least recently used ones past the byte budget (LRU eviction).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = ["BLOCK_CHARS", "PrefixIndex", "SavedPrefix", "common_blocks", "prefix_chain"]

# 512 characters are ~128 tokens of English or code: fine enough that a prompt's shared part is found to within a
# few dozen tokens, coarse enough that Codex's ~25,000-character first request is a chain of ~50 hashes.
BLOCK_CHARS = 512


def prefix_chain(text: str, block_chars: int = BLOCK_CHARS) -> list[str]:
    """The chained hashes of ``text``'s whole blocks (a trailing partial block has none). Linear in ``text``."""
    out: list[str] = []
    previous = b""
    for start in range(0, len(text) - block_chars + 1, block_chars):
        previous = hashlib.blake2b(previous + text[start : start + block_chars].encode("utf-8", "surrogatepass"),
                                   digest_size=12).digest()
        out.append(previous.hex())
    return out


def common_blocks(a: list[str], b: list[str]) -> int:
    """How many leading blocks two chains share (binary search: chained hashes agree on a prefix of positions)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[middle - 1] == b[middle - 1]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(slots=True)
class SavedPrefix:
    """One saved llama.cpp slot state. ``name`` is its file stem (``<name>.bin``, metadata in ``<name>.json``)."""

    name: str
    chain: list[str]
    tokens: int
    size: int
    key: str | None = None
    used_at: float = 0.0
    hits: int = field(default=0)


class PrefixIndex:
    """The saved prefixes of one model, within ``max_bytes`` on disk."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_bytes = max_bytes
        self._entries: dict[str, SavedPrefix] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self._entries.values())

    def entries(self) -> list[SavedPrefix]:
        return list(self._entries.values())

    def best(self, chain: list[str], key: str | None = None) -> tuple[SavedPrefix | None, int]:
        """The saved prefix sharing the most leading blocks with ``chain`` and how many; ``(None, 0)`` when none
        shares one. Ties: the one made under ``key``, then the most recently used."""
        found: SavedPrefix | None = None
        found_blocks = 0
        for entry in self._entries.values():
            blocks = common_blocks(chain, entry.chain)
            if blocks == 0:
                continue
            if found is None or (blocks, entry.key == key and key is not None, entry.used_at) > (
                    found_blocks, found.key == key and key is not None, found.used_at):
                found, found_blocks = entry, blocks
        return found, found_blocks

    def covers(self, chain: list[str]) -> bool:
        """True when a saved prefix holds all of ``chain`` already (saving it again would add nothing)."""
        return any(common_blocks(chain, e.chain) == len(chain) for e in self._entries.values())

    def add(self, entry: SavedPrefix) -> list[SavedPrefix]:
        """Index ``entry``; returns the entries it supersedes (removed: their whole chain starts ``entry``'s)."""
        superseded = [e for e in self._entries.values()
                      if e.name != entry.name and common_blocks(entry.chain, e.chain) == len(e.chain)]
        for old in superseded:
            del self._entries[old.name]
        self._entries[entry.name] = entry
        return superseded

    def touch(self, name: str, now: float) -> None:
        entry = self._entries.get(name)
        if entry is not None:
            entry.used_at = now
            entry.hits += 1

    def remove(self, name: str) -> SavedPrefix | None:
        return self._entries.pop(name, None)

    def over_budget(self) -> list[SavedPrefix]:
        """Removes and returns the least recently used entries until the rest fit in ``max_bytes``."""
        evicted: list[SavedPrefix] = []
        total = self.total_bytes
        for entry in sorted(self._entries.values(), key=lambda e: e.used_at):
            if total <= self.max_bytes:
                break
            del self._entries[entry.name]
            total -= entry.size
            evicted.append(entry)
        return evicted
