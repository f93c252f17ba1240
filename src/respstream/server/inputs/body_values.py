"""Typed reads of a request body's values, each a 400 naming the field when it is wrong; and the body's depth bound.

Shared by the parsers of ``POST /v1/responses`` (:mod:`~respstream.server.inputs.requests` and the ``input`` and
``tools`` fields beside it) and the conversations endpoint.
"""

from __future__ import annotations

import math
from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = ["MAX_JSON_DEPTH", "check_depth", "invalid", "opt_bool", "opt_kind", "opt_number", "opt_str", "wrong_type"]

# Deepest nesting of arrays/objects a request body may have. Real requests need about 6 (input -> item -> content ->
# part, or a tool's JSON Schema); anything far deeper is rejected before it reaches code (or an encoder) that recurses.
MAX_JSON_DEPTH = 64


def invalid(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def wrong_type(param: str, expected: str) -> HTTPError:
    return invalid(f"{param} must be {expected}", param, "invalid_type")


def opt_kind(value: Any, param: str, default: str | None = None) -> str | None:
    """A discriminator such as ``type`` or ``role``: a string (or absent -> ``default``). Raises 400 naming
    ``param`` for anything else: a list or object here must never reach a set/dict membership test."""
    if value is None:
        return default
    if not isinstance(value, str):
        raise wrong_type(param, "a string")
    return value


def check_depth(body: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise a 400 ``invalid_json`` if ``body`` nests arrays/objects deeper than ``limit`` (iterative: no recursion
    on hostile input)."""
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if depth > limit:
            raise HTTPError(400, "invalid_json", f"the request body nests arrays/objects deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def opt_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise wrong_type(key, "a string")
    return value


def opt_bool(body: dict[str, Any], key: str) -> bool | None:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise wrong_type(key, "a boolean")
    return value


def opt_number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise wrong_type(key, "a number")
    if not low <= value <= high:
        raise invalid(f"{key} must be between {low:g} and {high:g}", key)
    return float(value)
