"""What every provider adapter (Anthropic, Gemini) needs from a Chat-shaped generation request, provider-neutral.

- :class:`RefusedField`: a request field the provider cannot honour; the adapter's ``check_request`` turns it into a
  400 naming the field before streaming (:func:`refused_as_http`), ``generate`` into a failed response.
- :class:`ToolNames`: reversible provider-safe tool names. The pipeline already flattens ``namespace`` tools to
  ``<namespace>__<name>`` (server/events/client_tool_kinds.py); a flat name a provider's name rule refuses (too long,
  other characters) gets a stable safe name with a hash, and calls come back under the name the pipeline knows.
- :func:`function_tools` / :func:`tool_choice_of`: the offered tools and ``tool_choice`` in one typed shape.
- :func:`call_arguments`: the ``""`` -> ``"{}"`` rule for a call's arguments; :func:`arguments_object` reads them.
- :data:`REASONING_KEY`: the assistant message key under which history reasoning items (with the provider's
  ``encrypted_content``) reach an adapter, in order (see server/inputs/history.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from respstream.server.http_errors import HTTPError

__all__ = ["REASONING_KEY", "FunctionTool", "RefusedField", "ToolChoice", "ToolNames", "arguments_object",
           "call_arguments", "function_tools", "refused_as_http", "tool_choice_of"]

# On an assistant message: [{"summary": str | None, "encrypted_content": str}], the history's reasoning items before
# it, in order; "summary" is their summary text, None when the item had no summary parts (Anthropic: redacted).
REASONING_KEY: Final = "encrypted_reasoning"


class RefusedField(ValueError):
    """``field`` (a Responses request path such as ``text.format`` or ``input``) cannot be sent to this provider."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def refused_as_http(exc: RefusedField, provider: str) -> HTTPError:
    """The 400 the client gets before streaming (``unsupported_parameter``, ``param`` the field)."""
    return HTTPError(400, "unsupported_parameter", f"{exc.field} cannot be sent to {provider}: {exc.message}",
                     param=exc.field)


@dataclass(frozen=True, slots=True)
class FunctionTool:
    name: str  # as the pipeline knows it (flat)
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@dataclass(frozen=True, slots=True)
class ToolChoice:
    mode: Literal["auto", "required", "none", "named"]
    name: str | None = None  # the function, for "named"


def function_tools(tools: list[dict[str, Any]]) -> list[FunctionTool]:
    """Chat Completions ``tools`` (or flat Responses function tools) as :class:`FunctionTool`. Raises
    :class:`RefusedField` (``tools``) for a tool that is not a function."""
    out: list[FunctionTool] = []
    for tool in tools:
        inner = tool.get("function")
        spec: dict[str, Any] = inner if isinstance(inner, dict) else tool
        if tool.get("type") != "function" or not isinstance(spec.get("name"), str):
            raise RefusedField("tools", f"tool type {tool.get('type')!r} has no provider form (functions only)")
        parameters = spec.get("parameters")
        out.append(FunctionTool(spec["name"], str(spec.get("description") or ""),
                                parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}},
                                spec.get("strict") is True))
    return out


def tool_choice_of(choice: Any) -> ToolChoice:
    """Chat (``{"type": "function", "function": {"name"}}``) or Responses (``{"type": "function", "name"}``,
    ``{"type": "allowed_tools", "mode"}``: the pipeline offers only the allowed tools) ``tool_choice``.
    Raises :class:`RefusedField` (``tool_choice``)."""
    if choice is None or choice == "auto":
        return ToolChoice("auto")
    if choice in ("required", "none"):
        return ToolChoice(choice)
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind in ("function", "custom"):
            inner = choice.get("function")
            name = inner.get("name") if isinstance(inner, dict) else choice.get("name")
            if isinstance(name, str) and name:
                return ToolChoice("named", name)
        if kind == "allowed_tools":
            return ToolChoice("required" if choice.get("mode") == "required" else "auto")
    raise RefusedField("tool_choice", f"{choice!r} is not auto, required, none, a named function or allowed_tools")


def call_arguments(raw: str) -> str:
    """A call's arguments as sent on: a call without arguments streamed ``""``, which is ``{}``."""
    return raw if raw.strip() else "{}"


def arguments_object(raw: str, where: str) -> dict[str, Any]:
    """A history call's arguments as the JSON object providers take. Raises :class:`RefusedField` (``where``)."""
    try:
        value = json.loads(call_arguments(raw))
    except ValueError:
        raise RefusedField(where, "the call's arguments are not JSON (a call cut short cannot be sent back)") from None
    if not isinstance(value, dict):
        raise RefusedField(where, "the call's arguments must be a JSON object")
    return value


class ToolNames:
    """Flat tool name <-> a name the provider takes (``valid``: its name rule). Stable: a name maps the same way in
    every request, so calls in the history match the tools of the next turn."""

    def __init__(self, valid: re.Pattern[str], max_length: int) -> None:
        self._valid = valid
        self._max = max_length
        self._back: dict[str, str] = {}

    def to_provider(self, name: str) -> str:
        safe = name if len(name) <= self._max and self._valid.fullmatch(name) else self._mangled(name)
        self._back[safe] = name
        return safe

    def from_provider(self, safe: str) -> str:
        """The pipeline's name for a name the provider called (unknown names pass unchanged)."""
        return self._back.get(safe, safe)

    def _mangled(self, name: str) -> str:
        digest = hashlib.sha256(name.encode()).hexdigest()[:10]
        kept = re.sub(r"[^A-Za-z0-9_]", "_", name)[: self._max - len(digest) - 1]
        return f"{kept or 't'}_{digest}"
