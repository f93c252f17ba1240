"""Structured output (``text.format``): parse the request's format, forward it, and check the model's final answer.

How this works: ``text.format`` ``json_schema`` (with ``name``, ``schema``, ``strict``, ``description``) and
``json_object`` become the Chat Completions ``response_format`` the upstream gets (llama.cpp turns a schema into a
grammar, vLLM into guided decoding, OpenAI enforces it). The answer streams as usual; when the message is done its
text is parsed as JSON and, for ``json_schema``, validated with the ``jsonschema`` library (the schema's own
``$schema`` dialect, Draft 2020-12 by default). An answer that does not parse or validate never ends as
``completed``: the pipeline marks the message ``incomplete`` and ends the response ``failed`` with code
``invalid_structured_output`` and a message naming the JSON path that broke (a token-limit stop stays an ordinary
``incomplete``).

A ``$ref`` is resolved only inside the schema itself: no retriever is configured, so a reference to a URL is never
fetched (the answer then fails naming it).

Cost bounds (docs/security.md "Work caps per request"): when the request is parsed, one linear walk holds the
schema to the ``[limits]`` caps (bytes, nodes, depth, enum/const values, regexes; a 400 names the cap). The checks
whose cost can grow faster than their input (the meta-schema check with its ``uniqueItems``, the answer's
validation, every ``pattern``) run in a validation process (:mod:`~respstream.server.inputs.schema_pool`) that is killed
when ``validation_seconds`` pass, with regexes on a linear-time engine; the event loop only waits for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from respstream.server import request_limits
from respstream.server.http_errors import HTTPError
from respstream.server.inputs import schema_pool

__all__ = [
    "MAX_VALIDATED_CHARS",
    "TextFormat",
    "check_output",
    "check_schema",
    "parse_text_format",
]

MAX_VALIDATED_CHARS = 4 << 20  # a longer structured answer fails instead of being parsed
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True, slots=True)
class TextFormat:
    """``text.format``: ``type`` is ``text``, ``json_object`` or ``json_schema`` (then ``name`` and ``schema``)."""

    type: str = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None
    schema_json: str | None = field(default=None, compare=False, repr=False)  # the schema as sent to the checker

    @property
    def structured(self) -> bool:
        return self.type != "text"

    def to_json(self) -> dict[str, Any]:
        """The format as echoed in the Response (OpenAI's shape)."""
        if self.type != "json_schema":
            return {"type": self.type}
        return {"type": "json_schema", "name": self.name, "description": self.description, "schema": self.schema,
                "strict": bool(self.strict)}

    def response_format(self) -> dict[str, Any] | None:
        """The Chat Completions ``response_format`` (``None`` for plain text)."""
        if self.type == "json_object":
            return {"type": "json_object"}
        if self.type != "json_schema":
            return None
        spec: dict[str, Any] = {"name": self.name, "schema": self.schema}
        if self.strict is not None:
            spec["strict"] = self.strict
        if self.description is not None:
            spec["description"] = self.description
        return {"type": "json_schema", "json_schema": spec}


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def parse_text_format(raw: Any) -> TextFormat:
    """``text.format`` from the request. Raises 400 naming ``text.format.<field>``."""
    if raw is None:
        return TextFormat()
    if not isinstance(raw, dict):
        raise _bad("text.format must be an object", "text.format", "invalid_type")
    kind = raw.get("type")
    if kind == "text" or kind == "json_object":
        extra = sorted(set(raw) - {"type"})
        if extra:
            raise _bad(f"text.format.{extra[0]} is not valid for type {kind!r}", f"text.format.{extra[0]}",
                       "unsupported_parameter")
        return TextFormat(kind)
    if kind != "json_schema":
        raise _bad("text.format.type must be text, json_schema or json_object", "text.format.type")
    for key in raw:
        if key not in ("type", "name", "schema", "strict", "description"):
            raise _bad(f"text.format.{key} is not supported", f"text.format.{key}", "unsupported_parameter")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise _bad("text.format.name is required for json_schema", "text.format.name", "missing_required_parameter")
    if len(name) > 64 or not set(name) <= _NAME_CHARS:
        raise _bad("text.format.name must be at most 64 characters of a-z, A-Z, 0-9, _ and -", "text.format.name")
    schema = raw.get("schema")
    if not isinstance(schema, dict):
        raise _bad("text.format.schema must be a JSON Schema object", "text.format.schema",
                   "missing_required_parameter" if schema is None else "invalid_type")
    schema_json = _check_size(schema)
    strict = raw.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad("text.format.strict must be a boolean", "text.format.strict", "invalid_type")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise _bad("text.format.description must be a string", "text.format.description", "invalid_type")
    return TextFormat("json_schema", name=name, schema=schema, strict=strict, description=description,
                      schema_json=schema_json)


def _over(what: str, limit: int, key: str) -> HTTPError:
    return _bad(f"text.format.schema has more than {limit} {what} (limits.{key})", "text.format.schema",
                "schema_too_large")


def _check_size(schema: dict[str, Any]) -> str:
    """The schema as compact JSON, after one linear walk holds it to the ``[limits]`` caps."""
    limits = request_limits.current()
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > limits.schema_max_bytes:
        raise _over("bytes of JSON", limits.schema_max_bytes, "schema_max_bytes")
    nodes = values = patterns = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > limits.schema_max_nodes:
            raise _over("nodes (objects, arrays and values)", limits.schema_max_nodes, "schema_max_nodes")
        if depth > limits.schema_max_depth:
            raise _over("levels of nesting", limits.schema_max_depth, "schema_max_depth")
        if isinstance(node, dict):
            enum = node.get("enum")
            values += (len(enum) if isinstance(enum, list) else 0) + ("const" in node)
            patterns += isinstance(node.get("pattern"), str)
            props = node.get("patternProperties")
            patterns += len(props) if isinstance(props, dict) else 0
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    if values > limits.schema_max_enum_values:
        raise _over("enum/const values", limits.schema_max_enum_values, "schema_max_enum_values")
    if patterns > limits.schema_max_patterns:
        raise _over("regexes (pattern, patternProperties)", limits.schema_max_patterns, "schema_max_patterns")
    return text


async def check_schema(fmt: TextFormat) -> None:
    """Check ``fmt``'s schema against its meta-schema and compile its regexes, in a validation process.

    Raises 400 naming ``text.format.schema``; plain text and ``json_object`` pass at once."""
    if fmt.schema is None:
        return
    problem = await schema_pool.ask({"op": "schema", "schema": fmt.schema})
    if problem is not None:
        raise _bad(f"text.format.schema {problem}", "text.format.schema")


async def check_output(text: str, fmt: TextFormat) -> str | None:
    """Why the final ``text`` does not satisfy ``fmt``, or ``None`` when it does (plain text always does)."""
    if not fmt.structured:
        return None
    if len(text) > MAX_VALIDATED_CHARS:
        return f"the answer is longer than {MAX_VALIDATED_CHARS} characters, too long to validate"
    schema = None if fmt.schema is None else fmt.schema_json or json.dumps(fmt.schema, separators=(",", ":"))
    return await schema_pool.ask({"op": "answer", "schema": schema, "text": text, "name": fmt.name or ""})
