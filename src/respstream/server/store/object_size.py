"""What Python objects really take in memory: :func:`deep_size`, and the calibrated per-object costs of the memory
store (issue 42, H4v).

Why: the memory store charged a record the length of its JSON. A ``store: false`` WebSocket turn of 30,000 tiny
input items was charged 4.3 MB and held 17.4 MB: each item is a dict (232+ bytes) of short strings (50+ bytes
each), where its JSON is ~30 bytes. A budget counted in JSON bytes let 1.28 GB pass a 256 MiB budget.

:func:`deep_size` walks dicts, lists and tuples and adds ``sys.getsizeof`` of every object once (an object reached
twice, as the interned dict keys shared by every item, takes its memory once). It is linear in the objects
walked. The memory store keeps a record's request as compact JSON bytes instead (exact, and a fraction of the
objects), so the walk is used for what stays live objects: the Response snapshot.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from respstream.server.store.base import DeltaEntry, LogEntry

__all__ = ["DELTA_ENTRY_BYTES", "DICT_ENTRY_BYTES", "LOG_ENTRY_BYTES", "SLOT_BYTES", "deep_size", "deep_sizes"]

SLOT_BYTES = 8  # a list slot or half a dict slot's pointers; dict tables also keep a hash and a spare third
# One more key in a dict: (hash, key, value) and the index slot, the table kept at most 2/3 full.
DICT_ENTRY_BYTES = (3 * SLOT_BYTES + 1) * 3 // 2

# One log entry besides its payload: the struct, its list slot (the payload is added by the store).
LOG_ENTRY_BYTES = sys.getsizeof(LogEntry(0, "", b"")) + SLOT_BYTES
DELTA_ENTRY_BYTES = sys.getsizeof(DeltaEntry(0, b"", None)) + SLOT_BYTES  # type: ignore[arg-type]  # the template is shared by a part

_ATOMS = (str, bytes, int, float)
# What sys.getsizeof says without its method lookup, which costs more than the rest of an object's step: a compact
# ASCII str (every str JSON decoding makes) is its header, a byte a character and the terminator; a float is fixed.
_ASCII_STR = sys.getsizeof("")
_FLOAT = sys.getsizeof(0.0)
_LEAVES = frozenset(_ATOMS)  # exactly these types (a bool is an int, but a singleton: never counted)


def deep_size(value: Any) -> int:
    """Bytes ``value`` and everything it holds take (dicts, lists, tuples followed; each object counted once)."""
    return _walk(value, set())


def deep_sizes(values: list[Any]) -> list[int]:
    """:func:`deep_size` of each value, an object shared by several (the keys every item repeats) counted once, with
    the first value that holds it: the sizes add up to what the values take together."""
    seen: set[int] = set()
    return [_walk(value, seen) for value in values]


def _walk(value: Any, seen: set[int]) -> int:
    # A container's leaves (str, int, float, bytes: most of what decoded JSON holds) are measured as the container is
    # read, never pushed on the stack: about half the interpreter steps an object (issue 41). Each object still
    # counts once, so the total does not depend on the order of the walk.
    size = sys.getsizeof
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        key = id(item)
        if key in seen or item is None or item is True or item is False:
            continue  # the singletons: shared by everybody, never freed
        seen.add(key)
        total += size(item)
        kind = type(item)
        if kind is dict:
            children: Iterable[Any] = (*item, *item.values())
        elif kind is list or kind is tuple:
            children = item
        elif not isinstance(item, _ATOMS) and isinstance(item, dict | list | tuple):  # subclasses
            children = list(item.values()) if isinstance(item, dict) else item
        else:
            continue
        for child in children:
            leaf = type(child)
            if leaf in _LEAVES:
                key = id(child)
                if key not in seen:
                    seen.add(key)
                    if leaf is str and child.isascii():  # a compact ASCII str: its header and a byte a character
                        total += _ASCII_STR + len(child)
                    elif leaf is float:
                        total += _FLOAT
                    else:
                        total += size(child)
            elif child is not None and child is not True and child is not False:
                stack.append(child)
    return total
