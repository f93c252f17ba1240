"""Checks a request body against the official ``anthropic`` SDK's request types (its TypedDicts), strictly: every key
must be one the type declares, every required key present, every value of a declared type (literals, unions, lists,
nested types). pydantic's own TypedDict validation is lenient here (unknown keys and unknown block types pass), so
this walks the SDK's type hints itself. Used by the SIMULATED Anthropic provider on every request it receives."""

from __future__ import annotations

import collections.abc
import types
import typing
from functools import cache
from typing import Any, Literal, Union

from anthropic.types.message_create_params import MessageCreateParamsStreaming

__all__ = ["request_problems"]


def request_problems(body: Any) -> list[str]:
    """What is wrong with ``body`` as a streaming ``POST /v1/messages`` (empty: the SDK's types accept it)."""
    return _check(body, MessageCreateParamsStreaming, "body")


@cache
def _hints(typed: type) -> tuple[dict[str, Any], frozenset[str]]:
    """Field types and required keys. (The SDK's modules use string annotations, which leave ``__required_keys__``
    empty: the ``Required[...]`` wrappers say it.)"""
    extras = typing.get_type_hints(typed, include_extras=True)
    # (the SDK's generated types are all total=False with Required[...] on what is required)
    required = {key for key, hint in extras.items() if _wrapper(hint) == "Required"}
    return typing.get_type_hints(typed), frozenset(required)


def _wrapper(hint: Any) -> str:
    origin = typing.get_origin(hint)
    return str(getattr(origin, "_name", "") or getattr(origin, "__name__", "") or repr(origin).rsplit(".", 1)[-1])


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def _check(value: Any, tp: Any, where: str) -> list[str]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is object:
        return []
    if origin is typing.Annotated:
        return _check(value, args[0], where)
    if origin in (typing.Required, typing.NotRequired):
        return _check(value, args[0], where)
    if origin is Union or isinstance(tp, types.UnionType):
        found = [_check(value, member, where) for member in args]
        if any(not f for f in found):
            return []
        best = min(found, key=len)
        return best if len(best) <= 2 else [f"{where}: matches none of {len(args)} allowed shapes"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if tp is type(None):
        return [] if value is None else [f"{where}: must be null"]
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: must be an object ({tp.__name__})"]
        hints, required = _hints(tp)
        problems = [f"{where}.{key}: not a field of {tp.__name__}" for key in value if key not in hints]
        problems += [f"{where}.{key}: required by {tp.__name__}" for key in required if key not in value]
        for key, item in value.items():
            if key in hints:
                problems += _check(item, hints[key], f"{where}.{key}")
        return problems
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        return [] if isinstance(value, dict) else [f"{where}: must be an object"]
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence) or (
            origin is not None and getattr(origin, "__name__", "") == "SequenceNotStr"):
        if not isinstance(value, list):
            return [f"{where}: must be a list"]
        item_type = args[0] if args else Any
        return [p for i, item in enumerate(value) for p in _check(item, item_type, f"{where}[{i}]")]
    if getattr(tp, "__name__", "") == "SequenceNotStr":
        return [] if isinstance(value, list) else [f"{where}: must be a list"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{where}: must be a string"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{where}: must be a boolean"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{where}: must be an integer"]
    if tp is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{where}: must be a number"]
    if isinstance(tp, typing.TypeVar):
        return []
    return [f"{where}: the checker does not know type {tp!r}"]
