"""The prefix index (block chains, longest match, supersede, LRU budget) and its files on disk. No model."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from respstream.server.upstream.embedded.prefix_index import (
    BLOCK_CHARS,
    PrefixIndex,
    SavedPrefix,
    common_blocks,
    prefix_chain,
)
from respstream.server.upstream.embedded.slot_files import ORPHAN_SECONDS, load_saved, remove_saved, write_meta


def _text(seed: str, blocks: int) -> str:
    return "".join(f"{seed}{i:06d}".ljust(BLOCK_CHARS, ".") for i in range(blocks))


def test_chain_has_one_hash_per_whole_block_and_shares_exactly_the_common_blocks() -> None:
    shared = _text("s", 5)
    a = prefix_chain(shared + _text("a", 3) + "tail")
    b = prefix_chain(shared + _text("b", 2))
    assert len(a) == 8 and len(b) == 7
    assert common_blocks(a, b) == 5 == common_blocks(b, a)
    assert common_blocks(a, a) == 8 and common_blocks(a, []) == 0
    # A change inside block 0 changes every later hash (the chain), so nothing is shared.
    assert common_blocks(a, prefix_chain("X" + shared[1:] + _text("a", 3))) == 0
    assert prefix_chain("short") == []


def _entry(name: str, chain: list[str], used_at: float, size: int = 100, key: str | None = None) -> SavedPrefix:
    return SavedPrefix(name=name, chain=chain, tokens=len(chain) * 128, size=size, key=key, used_at=used_at)


def test_best_is_the_longest_shared_prefix_then_the_same_key_then_the_most_recent() -> None:
    base = prefix_chain(_text("p", 6))
    index = PrefixIndex(10_000)
    index.add(_entry("short", base[:2], 1.0))
    index.add(_entry("other", prefix_chain(_text("q", 6)), 9.0))
    found, blocks = index.best(base)
    assert (found.name if found else None, blocks) == ("short", 2)
    # Two that share 4 blocks each (neither starts the other): the key breaks the tie, else the more recent.
    index.add(_entry("k1", [*base[:4], "x1"], 2.0, key="session-1"))
    index.add(_entry("k2", [*base[:4], "x2"], 3.0, key="session-2"))
    found, blocks = index.best(base, "session-1")
    assert (found.name if found else None, blocks) == ("k1", 4)
    found, blocks = index.best(base)
    assert (found.name if found else None, blocks) == ("k2", 4)
    assert index.best(prefix_chain(_text("z", 3))) == (None, 0)


def test_add_supersedes_prefixes_of_the_new_chain_and_covers_says_what_is_held() -> None:
    base = prefix_chain(_text("p", 6))
    index = PrefixIndex(10_000)
    index.add(_entry("two", base[:2], 1.0))
    assert [e.name for e in index.add(_entry("sibling", [*base[:2], "other"], 1.0))] == ["two"]
    superseded = index.add(_entry("five", base[:5], 2.0))
    assert superseded == []  # the sibling is not a prefix of the new one: kept
    assert "two" not in index and "sibling" in index and "five" in index
    assert index.covers(base[:3]) and index.covers(base[:5]) and not index.covers(base)


def test_over_budget_evicts_least_recently_used_first() -> None:
    index = PrefixIndex(250)
    for name, used in (("old", 1.0), ("mid", 2.0), ("new", 3.0)):
        index.add(_entry(name, prefix_chain(_text(name, 2)), used, size=100))
    index.touch("old", 10.0)  # used again: now the most recent
    evicted = index.over_budget()
    assert [e.name for e in evicted] == ["mid"] and index.total_bytes == 200
    assert sorted(e.name for e in index.entries()) == ["new", "old"]
    with pytest.raises(ValueError):
        PrefixIndex(-1)


def test_files_round_trip_and_leftovers_are_removed_only_when_old(tmp_path: Path) -> None:
    chain = prefix_chain(_text("f", 3))
    (tmp_path / "pa.bin").write_bytes(b"x" * 1234)
    write_meta(tmp_path, _entry("pa", chain, 5.0, key="k"))
    (tmp_path / "young.bin").write_bytes(b"y")  # being written by another process: left alone
    (tmp_path / "orphan.bin").write_bytes(b"z")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "broken.bin").write_bytes(b"b")
    old = time.time() - ORPHAN_SECONDS - 5
    for name in ("orphan.bin", "broken.json", "broken.bin"):
        os.utime(tmp_path / name, (old, old))
    found = load_saved(tmp_path)
    assert [(e.name, e.chain, e.size, e.key, e.tokens) for e in found] == [("pa", chain, 1234, "k", 3 * 128)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pa.bin", "pa.json", "young.bin"]
    assert json.loads((tmp_path / "pa.json").read_text())["used_at"] == 5.0
    remove_saved(tmp_path, "pa")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["young.bin"]
