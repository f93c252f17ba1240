"""deep_size's walk (issue 41: leaves measured in place, ASCII strings and floats without sys.getsizeof's lookup)
still gives exactly what sys.getsizeof says of every object reached once."""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any

import msgspec
import pytest

from respstream.server.store.object_size import deep_size, deep_sizes


def _reference(value: Any, seen: set[int] | None = None) -> int:
    """The plain definition: every object reached (dicts' keys and values, lists', tuples' items) once, by
    sys.getsizeof; None, True and False never."""
    seen = set() if seen is None else seen
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if item is None or item is True or item is False or id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.values())
            if type(item) is dict:
                stack.extend(item.keys())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


SHARED = "shared-string"
VALUES: list[Any] = [
    {"model": "fake-model", "input": "hello", "stream": True},
    msgspec.json.decode(b'{"input": [{"role": "user", "content": "caf\\u00e9 \\u2603 \\ud83d\\ude00"}], "n": 1e300}'),
    {"ints": [0, 1, -5, 2**30, 2**62, 2**200, -(2**100)], "floats": [0.0, -1.5, float("inf")], "b": b"bytes"},
    {"s": ["", "a", "é", "日本", "😀", "x" * 10_000, "é" * 300, SHARED, SHARED], "t": (1, "two", (3.0, None))},
    [[[[]]], {}, {"a": {"b": {"c": [True, False, None]}}}],
    OrderedDict([("k", "v"), ("n", [1, 2])]),  # a dict subclass: values followed, as before
    msgspec.json.decode(msgspec.json.encode({"input": [{"type": "message", "role": "user", "content": f"t{i}"}
                                                        for i in range(500)]})),
]


@pytest.mark.parametrize("value", VALUES)
def test_deep_size_is_the_sum_of_getsizeof_over_each_object_once(value: Any) -> None:
    assert deep_size(value) == _reference(value)


def test_a_non_ascii_string_is_measured_by_getsizeof() -> None:
    text = "ü" * 100
    text.encode()  # may cache a UTF-8 copy inside the str, which getsizeof counts
    assert deep_size([text]) == sys.getsizeof([text]) + sys.getsizeof(text)


def test_deep_sizes_credit_a_shared_object_to_the_first_value_only() -> None:
    items = [{"role": SHARED, "n": 2.5}, {"role": SHARED, "n": 3.5}]
    seen: set[int] = set()
    assert deep_sizes(items) == [_reference(items[0], seen), _reference(items[1], seen)]
    assert deep_sizes(items)[1] < deep_sizes(items)[0]
