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

Cost bounds: the schema is checked once (``check_schema``) while the request is validated; the request body limit
bounds its size. Validation runs in a worker thread (never on the event loop) under
:data:`VALIDATION_TIMEOUT_SECONDS`, and answers over :data:`MAX_VALIDATED_CHARS` are refused rather than parsed.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from respstream.server.http_errors import HTTPError

__all__ = [
    "MAX_VALIDATED_CHARS",
    "VALIDATION_TIMEOUT_SECONDS",
    "TextFormat",
    "check_output",
    "parse_text_format",
]

MAX_VALIDATED_CHARS = 4 << 20  # a longer structured answer fails instead of being parsed
VALIDATION_TIMEOUT_SECONDS = 5.0  # a schema whose validation takes longer (pathological `pattern`) fails the answer
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True, slots=True)
class TextFormat:
    """``text.format``: ``type`` is ``text``, ``json_object`` or ``json_schema`` (then ``name`` and ``schema``)."""

    type: str = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None

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
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "".join(f"/{p}" for p in exc.path)
        raise _bad(f"text.format.schema is not a valid JSON Schema (at '{where or '/'}'): {exc.message}",
                   "text.format.schema") from None
    strict = raw.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad("text.format.strict must be a boolean", "text.format.strict", "invalid_type")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise _bad("text.format.description must be a string", "text.format.description", "invalid_type")
    return TextFormat("json_schema", name=name, schema=schema, strict=strict, description=description)


def _problem(text: str, fmt: TextFormat) -> str | None:
    """Why ``text`` is not a valid answer for ``fmt`` (``None``: it is). Runs in a worker thread."""
    if len(text) > MAX_VALIDATED_CHARS:
        return f"the answer is longer than {MAX_VALIDATED_CHARS} characters, too long to validate"
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"the answer is not valid JSON ({exc})"
    if fmt.type == "json_object":
        return None if isinstance(value, dict) else "the answer is JSON but not an object"
    assert fmt.schema is not None
    validator = jsonschema.validators.validator_for(fmt.schema)(fmt.schema)
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except Exception as exc:  # e.g. a $ref to a URL: no retriever is configured, so nothing is ever fetched
        return f"the schema {fmt.name!r} cannot be applied ({type(exc).__name__}: {str(exc)[:200]})"
    if error is None:
        return None
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
    return f"the answer does not match the schema {fmt.name!r} at {where}: {message}"


async def check_output(text: str, fmt: TextFormat) -> str | None:
    """Why the final ``text`` does not satisfy ``fmt``, or ``None`` when it does (plain text always does)."""
    if not fmt.structured:
        return None
    try:
        return await asyncio.wait_for(asyncio.to_thread(_problem, text, fmt), VALIDATION_TIMEOUT_SECONDS)
    except TimeoutError:
        return f"validating the answer against the schema took longer than {VALIDATION_TIMEOUT_SECONDS:g} s"
