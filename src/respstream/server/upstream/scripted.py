"""SIMULATED backend: an in-process, deterministic :class:`Upstream` for tests and benchmarks. Not a model.

Spec: ``scripted:N[?delay_ms=D&tool=NAME&fail_at=K&reasoning=R]``

- ``N`` text deltas (short words, the first without a leading space), ``D`` ms apart. With ``D = 0`` the chunks are
  prebuilt and yielded with no timer: this is the benchmark backend, so per-chunk cost is one ``yield`` (plus a
  ``sleep(0)`` every 64 chunks so one stream cannot starve the event loop).
- ``tool=NAME``: unless the last message is a tool result, the turn is one tool call to ``NAME`` and
  ``Finish("tool_calls")``. Arguments suit the server tools (``calculator`` -> ``{"expression": "2+2"}``,
  ``web_search`` -> the last user text as query, ``web_fetch``, ``current_datetime``); for a client function tool
  of that name, arguments are built from its JSON schema. After a tool result it answers with text, so loops end.
- ``fail_at=K``: raise ``UpstreamError("upstream_error")`` after ``K`` text deltas (``before_first_token`` only when
  ``K = 0``).
- ``reasoning=R``: ``R`` reasoning deltas before the text.
- ``max_output_tokens`` in the request below ``N`` stops early with ``Finish("length")``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from respstream.server.upstream.base import (
    Chunk,
    Finish,
    GenerationRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    Usage,
)

__all__ = ["ScriptedUpstream", "parse_scripted_spec"]

_WORDS = ("The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away.")
_YIELD_EVERY = 64


def parse_scripted_spec(spec: str) -> dict[str, Any]:
    """``scripted:N?delay_ms=D&tool=NAME&fail_at=K&reasoning=R`` -> constructor keywords. Raises ValueError."""
    if not spec.startswith("scripted"):
        raise ValueError(f"not a scripted upstream spec: {spec!r}")
    rest = spec[len("scripted") :].lstrip(":")
    parts = urlsplit("x:" + rest) if rest else None
    path = parts.path if parts else ""
    query = parse_qs(parts.query, keep_blank_values=True) if parts else {}
    options: dict[str, Any] = {}
    try:
        if path:
            options["deltas"] = int(path)
        for key, target in (("delay_ms", "delay_ms"), ("fail_at", "fail_at"), ("reasoning", "reasoning")):
            if key in query:
                options[target] = int(query.pop(key)[-1])
    except ValueError:
        raise ValueError(f"scripted upstream spec {spec!r}: N, delay_ms, fail_at, reasoning must be integers") from None
    if "tool" in query:
        options["tool"] = query.pop("tool")[-1] or None
    if query:
        raise ValueError(f"scripted upstream spec {spec!r}: unknown option(s) {', '.join(sorted(query))}")
    if options.get("deltas", 0) < 0 or options.get("delay_ms", 0) < 0:
        raise ValueError(f"scripted upstream spec {spec!r}: N and delay_ms must be >= 0")
    return options


def _sample_value(schema: Any) -> Any:
    """A plausible value for a JSON-schema fragment (for simulated tool-call arguments)."""
    if not isinstance(schema, dict):
        return "example"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [_sample_value(schema.get("items"))]
    if kind == "object":
        raw_props = schema.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        raw_required = schema.get("required")
        required: list[Any] = raw_required if isinstance(raw_required, list) else list(props)
        return {key: _sample_value(props.get(key)) for key in required if key in props}
    return "example"


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class ScriptedUpstream:
    """SIMULATED upstream (see module docstring). ``models`` defaults to ``["scripted"]``."""

    def __init__(
        self,
        deltas: int = 8,
        *,
        name: str = "scripted",
        models: list[str] | None = None,
        delay_ms: int = 0,
        tool: str | None = None,
        fail_at: int | None = None,
        reasoning: int = 0,
    ) -> None:
        self.name = name
        self.models = list(models) if models else ["scripted"]
        self.deltas = deltas
        self.delay = delay_ms / 1000.0
        self.tool = tool
        self.fail_at = fail_at
        self.reasoning = reasoning
        self._text = [TextDelta(("" if i == 0 else " ") + _WORDS[i % len(_WORDS)]) for i in range(deltas)]
        self._calls = 0

    @classmethod
    def from_spec(cls, spec: str, *, name: str | None = None, models: list[str] | None = None) -> ScriptedUpstream:
        """Build from ``scripted:N?...``. Raises ValueError naming the bad part."""
        return cls(name=name or "scripted", models=models, **parse_scripted_spec(spec))

    def __repr__(self) -> str:
        return f"ScriptedUpstream(deltas={self.deltas}, delay_ms={self.delay * 1000:g}, tool={self.tool!r})"

    async def aclose(self) -> None:
        return None

    def _tool_arguments(self, request: GenerationRequest) -> str:
        name = self.tool or ""
        for tool in request.tools:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and function.get("name") == name:
                return msgspec.json.encode(_sample_value(function.get("parameters") or {"type": "object"})).decode()
        if name == "calculator":
            args: dict[str, Any] = {"expression": "2+2"}
        elif name == "web_search":
            args = {"query": _last_user_text(request.messages)[:200] or "respstream"}
        elif name == "web_fetch":
            args = {"url": "https://example.com/"}
        elif name == "current_datetime":
            args = {"timezone": "UTC"}
        else:
            args = {}
        return msgspec.json.encode(args).decode()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        """Yield the scripted chunks. Raises :class:`UpstreamError` at ``fail_at``."""
        self._calls += 1
        input_tokens = sum(len(str(m.get("content") or "")) for m in request.messages) // 4 + 1
        last_role = request.messages[-1].get("role") if request.messages else None
        if self.tool and last_role != "tool":
            arguments = self._tool_arguments(request)
            half = len(arguments) // 2
            call_id = f"call_scripted_{self._calls}"
            yield ToolCallDelta(0, call_id=call_id, name=self.tool, arguments=arguments[:half])
            yield ToolCallDelta(0, arguments=arguments[half:])
            yield Finish("tool_calls", Usage(input_tokens=input_tokens, output_tokens=1))
            return
        for i in range(self.reasoning):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield ReasoningDelta(("" if i == 0 else " ") + "thinking")
        limit = self.deltas
        reason = "stop"
        if request.max_output_tokens is not None and request.max_output_tokens < limit:
            limit, reason = max(0, request.max_output_tokens), "length"
        delay = self.delay
        fail_at = self.fail_at
        for i, chunk in enumerate(self._text[:limit]):
            if fail_at is not None and i >= fail_at:
                raise UpstreamError(
                    "upstream_error", f"{self.name}: simulated failure after {i} deltas", before_first_token=i == 0
                )
            if delay:
                await asyncio.sleep(delay)
            elif i % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)
            yield chunk
        if fail_at is not None and fail_at == limit:
            raise UpstreamError(
                "upstream_error", f"{self.name}: simulated failure after {limit} deltas", before_first_token=limit == 0
            )
        yield Finish(reason, Usage(input_tokens=input_tokens, output_tokens=limit + self.reasoning))
