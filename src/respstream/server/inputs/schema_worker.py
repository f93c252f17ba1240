"""The validation process: checks JSON Schemas and structured answers away from the gateway's event loop.

How this works: ``python -m respstream.server.inputs.schema_worker <memory-bytes>`` reads one JSON request a line on
stdin and writes one JSON reply a line on stdout (``{"problem": null | "..."}``). ``{"op": "schema", "schema": ...}``
checks a schema against its meta-schema and compiles its regexes; ``{"op": "answer", "schema": ..., "text": ...,
"name": ...}`` parses and validates an answer. The gateway (:mod:`~respstream.server.inputs.schema_pool`) kills the
process when its deadline passes, so nothing here has to be fast: a pathological schema costs this process its life,
never the gateway's loop or GIL.

Regexes (``pattern``, ``patternProperties``, ``additionalProperties`` with patterns) run on RE2, a linear-time
engine: ``^(a+)+$`` takes microseconds, not minutes. A pattern RE2 cannot compile (backreferences, lookaround) makes
the schema check fail naming it. Deep nesting ends as a clear problem (``RecursionError`` is caught), never a crash.
"""

from __future__ import annotations

import functools
import json
import resource
import sys
from collections.abc import Iterator
from typing import Any

import jsonschema
import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import jsonschema.exceptions
import jsonschema.validators
import re2  # type: ignore[import-untyped]

__all__ = ["answer_problem", "main", "schema_problem"]


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern)


class _LinearRe:
    """The part of :mod:`re` jsonschema's keywords use (``re.search``), on RE2."""

    @staticmethod
    def search(pattern: str, string: str) -> Any:
        return _compiled(pattern).search(string)


for _module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils):
    _module.re = _LinearRe  # type: ignore[attr-defined]  # this process only: every keyword regex runs on RE2


def _patterns(schema: Any) -> Iterator[tuple[str, str]]:
    """Every ``pattern`` and ``patternProperties`` key in ``schema``, with its JSON pointer."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"], f"{where}/pattern"
            props = node.get("patternProperties")
            if isinstance(props, dict):
                yield from ((key, f"{where}/patternProperties") for key in props)
            stack.extend((value, f"{where}/{key}") for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f"{where}/{i}") for i, value in enumerate(node))


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` cannot be used (``None``: it can)."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "".join(f"/{p}" for p in exc.path)
        return f"is not a valid JSON Schema (at '{where or '/'}'): {exc.message}"
    except RecursionError:
        return "nests too deeply to be checked"
    for pattern, where in _patterns(schema):
        try:
            _compiled(pattern)
        except re2.error as exc:
            return (f"has a regex the linear-time engine refuses at '{where}' ({exc}); backreferences and "
                    "lookaround are not supported")
    return None


@functools.lru_cache(maxsize=16)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    return jsonschema.validators.validator_for(schema)(schema)


def answer_problem(schema_json: str | None, text: str, name: str) -> str | None:
    """Why ``text`` is not a valid answer (``schema_json`` ``None``: any JSON object will do)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"the answer is not valid JSON ({exc})"
    except RecursionError:
        return "the answer nests too deeply to be parsed"
    if schema_json is None:
        return None if isinstance(value, dict) else "the answer is JSON but not an object"
    try:
        error = jsonschema.exceptions.best_match(_validator(schema_json).iter_errors(value))
    except RecursionError:
        return f"the answer nests too deeply to be checked against the schema {name!r}"
    except Exception as exc:  # e.g. a $ref to a URL: no retriever is configured, so nothing is ever fetched
        return f"the schema {name!r} cannot be applied ({type(exc).__name__}: {str(exc)[:200]})"
    if error is None:
        return None
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
    return f"the answer does not match the schema {name!r} at {where}: {message}"


def _answer(request: dict[str, Any]) -> str | None:
    if request["op"] == "schema":
        return schema_problem(request["schema"])
    return answer_problem(request.get("schema"), request["text"], request.get("name", ""))


def main() -> None:
    memory = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    for line in sys.stdin:
        try:
            problem = _answer(json.loads(line))
        except MemoryError:
            problem = "checking it needs more memory than a validation process may use"
        sys.stdout.write(json.dumps({"problem": problem}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
