"""The function tools a request offers, and the JSON Schema subset their parameters use. No IO.

How this works: :func:`offered_functions` maps Chat Completions ``tools`` to function name -> parameters schema (an
object schema when a tool has none). :func:`schema_errors` checks a value against such a schema the way tool
arguments need checking: ``type`` (a list of types too; an integral float is an integer, a bool is not a number),
``enum``, ``required``, ``additionalProperties: false``, and ``properties`` and ``items`` recursively (16 levels, the
first 256 items of a list). What it does not know (``$ref``, ``pattern``, an unknown type) it accepts: a call is
refused only for what is surely wrong. Used for calls written as text (text_tool_calls.py) and forced calls.
"""

from __future__ import annotations

from typing import Any

__all__ = ["offered_functions", "schema_errors"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
    "object": (dict,), "null": (type(None),),
}  # fmt: skip


def offered_functions(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Chat Completions ``tools`` -> function name -> its parameters schema."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            out[function["name"]] = parameters if isinstance(parameters, dict) else {"type": "object"}
    return out


def _type_ok(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    for name in kinds:
        expected = _JSON_TYPES.get(name) if isinstance(name, str) else None
        if expected is None:
            return True  # a type we do not know: do not refuse on it
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, expected):
            return True
    return False


def schema_errors(value: Any, schema: dict[str, Any], where: str = "arguments", depth: int = 0) -> list[str]:
    """What is wrong with ``value`` under ``schema`` (the JSON Schema subset tool parameters use). Empty: valid."""
    if depth > 16 or not isinstance(schema, dict):
        return []
    errors: list[str] = []
    if "type" in schema and not _type_ok(value, schema["type"]):
        return [f"{where} must be of type {schema['type']}"]
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        errors.append(f"{where} must be one of {schema['enum']}")
    if isinstance(value, dict):
        found = schema.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        for key in schema.get("required") or []:
            if key not in value:
                errors.append(f"{where}.{key} is required")
        if schema.get("additionalProperties") is False:
            errors.extend(f"{where}.{key} is not a parameter" for key in value if key not in properties)
        for key, item in value.items():
            if key in properties:
                errors.extend(schema_errors(item, properties[key], f"{where}.{key}", depth + 1))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value[:256]):
            errors.extend(schema_errors(item, schema["items"], f"{where}[{i}]", depth + 1))
    return errors
