"""SIMULATED backend: an in-process, deterministic :class:`Upstream` for tests and benchmarks. Not a model.

Spec: ``scripted:N[?delay_ms=D&tool=NAME&fail_at=K&reasoning=R&text=T]``

- ``N`` text deltas (short words, the first without a leading space), ``D`` ms apart. With ``D = 0`` the chunks are
  prebuilt and yielded with no timer: this is the benchmark backend, so per-chunk cost is one ``yield`` (plus a
  ``sleep(0)`` every 64 chunks so one stream cannot starve the event loop). ``generate_batches`` gives the same
  chunks cut at those pauses, as one read of a real upstream holds what arrived meanwhile (the pipeline's path).
- ``text=T`` (URL-encoded, e.g. ``text=%3Cimg%20src%3Dx%3E`` or ``text=**bold**+and+more``): the answer is exactly
  ``T``, split into ``N`` deltas of near-equal length (at most one character each when ``T`` is shorter than ``N``),
  or, when ``N`` is 0 or absent, into word-ish pieces (each word with the whitespace before it; trailing whitespace
  stays on the last piece). Joining the deltas always gives ``T`` back. An empty ``T`` streams no text at all.
- ``tool=NAME``: the first turn (any turn whose last message is not a tool result) calls ``NAME`` when that makes
  sense, decided from the tools the request offers (``GenerationRequest.tools``; the gateway's pipeline puts the
  enabled server tools and the client's function tools there, and offers none when ``tool_choice`` is ``none`` or
  the tool rounds are used up):

  * ``NAME`` is offered as a client function tool: arguments are built from its JSON schema;
  * ``NAME`` is offered as a server tool (``web_search``, ``web_fetch``, ``calculator``, ``current_datetime`` with
    the gateway's own schema): arguments the real tool accepts (``{"expression": "2+2"}``, ``{"query": <last user
    text>}``, ``{"url": "https://example.com/"}``, ``{"timezone": "UTC"}``);
  * ``NAME`` is not offered (or ``tool_choice`` is ``none``): no call; the turn is the text answer.

  A call is one :class:`ToolCallDelta` pair and ``Finish("tool_calls")``. After a tool result it answers with
  text, so tool loops end. ``tool=A,B``: each turn calls the first of them that is offered and not called yet in
  the conversation (an assistant ``tool_calls`` entry names it), so one response can chain A then B; when all
  were called it answers with text.
- ``fail_at=K``: raise ``UpstreamError("upstream_error")`` after ``K`` text deltas (``before_first_token`` only when
  ``K = 0``).
- ``reasoning=R``: ``R`` reasoning deltas before the text.
- ``max_output_tokens`` in the request below the number of text deltas stops early with ``Finish("length")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from respstream.server.tools.specs import TOOL_NAMES, is_server_tool_spec
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

__all__ = ["ScriptedUpstream", "parse_scripted_spec", "split_text"]

_WORDS = ("The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away.")
_YIELD_EVERY = 64
_WORDISH = re.compile(r"\s*\S+")


class _Pause:
    """A point where the script waits ``seconds`` (0: one turn of the event loop)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


_TURN = _Pause(0)


def parse_scripted_spec(spec: str) -> dict[str, Any]:
    """``scripted:N?delay_ms=D&tool=NAME&fail_at=K&reasoning=R&text=T`` -> constructor keywords.

    Raises ValueError naming the bad part.
    """
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
    if "text" in query:
        options["text"] = query.pop("text")[-1]  # parse_qs already undid the URL encoding
    if query:
        raise ValueError(f"scripted upstream spec {spec!r}: unknown option(s) {', '.join(sorted(query))}")
    if options.get("deltas", 0) < 0 or options.get("delay_ms", 0) < 0:
        raise ValueError(f"scripted upstream spec {spec!r}: N and delay_ms must be >= 0")
    return options


def split_text(text: str, parts: int) -> list[str]:
    """``text`` as ``parts`` near-equal pieces, or word-ish pieces when ``parts`` is 0. ``"".join`` gives it back."""
    if not text:
        return []
    if parts <= 0:
        # Over the text without its trailing whitespace: there every whitespace run ends in a word, so no search
        # position backtracks over a long blank tail (quadratic in it otherwise).
        pieces = _WORDISH.findall(text, 0, len(text.rstrip()))
        consumed = sum(map(len, pieces))
        if consumed < len(text):  # trailing whitespace (or all of it, for a blank text)
            tail = text[consumed:]
            if pieces:
                pieces[-1] += tail
            else:
                pieces = [tail]
        return pieces
    parts = min(parts, len(text))
    size, extra = divmod(len(text), parts)
    out: list[str] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


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


def _server_tool_arguments(name: str, request: GenerationRequest) -> dict[str, Any]:
    """Arguments the real server tool accepts (``web_fetch`` may still be refused by the address policy)."""
    if name == "calculator":
        return {"expression": "2+2"}
    if name == "web_search":
        return {"query": _last_user_text(request.messages)[:200].strip() or "respstream"}
    if name == "web_fetch":
        return {"url": "https://example.com/"}
    return {"timezone": "UTC"}  # current_datetime


class ScriptedUpstream:
    """SIMULATED upstream (see module docstring). ``models`` defaults to ``["scripted"]``.

    ``deltas``: the N of the spec (``None``: 8 words, or word-ish pieces of ``text``). Raises ValueError on N < 0.
    """

    # It takes image and file parts (and ignores them): the compliance suite's image-input test runs against it.
    input_modalities = ("text", "image", "file")

    def __init__(
        self,
        deltas: int | None = None,
        *,
        name: str = "scripted",
        models: list[str] | None = None,
        delay_ms: int = 0,
        tool: str | None = None,
        fail_at: int | None = None,
        reasoning: int = 0,
        text: str | None = None,
    ) -> None:
        if deltas is not None and deltas < 0:
            raise ValueError("scripted upstream: the number of deltas must be >= 0")
        self.name = name
        self.models = list(models) if models else ["scripted"]
        self.delay = delay_ms / 1000.0
        self.tool = tool
        self.fail_at = fail_at
        self.reasoning = reasoning
        self.text = text
        if text is not None:
            pieces = split_text(text, deltas or 0)
        else:
            count = 8 if deltas is None else deltas
            pieces = [("" if i == 0 else " ") + _WORDS[i % len(_WORDS)] for i in range(count)]
        self._text = [TextDelta(piece) for piece in pieces]
        self.deltas = len(self._text)
        self._calls = 0
        self._next_tool = tool or ""

    @classmethod
    def from_spec(cls, spec: str, *, name: str | None = None, models: list[str] | None = None) -> ScriptedUpstream:
        """Build from ``scripted:N?...``. Raises ValueError naming the bad part."""
        return cls(name=name or "scripted", models=models, **parse_scripted_spec(spec))

    def __repr__(self) -> str:
        return f"ScriptedUpstream(deltas={self.deltas}, delay_ms={self.delay * 1000:g}, tool={self.tool!r})"

    async def aclose(self) -> None:
        return None

    def tool_call_arguments(self, request: GenerationRequest) -> str | None:
        """The JSON arguments of this turn's call to ``tool``, or ``None`` when calling it makes no sense.

        See the module docstring for the rules; never raises.
        """
        name = self.tool
        if not name or request.tool_choice == "none":
            return None
        names = name.split(",")
        if len(names) == 1 and request.messages and request.messages[-1].get("role") == "tool":
            return None  # answer the tool result with text, so loops end
        called = {str(call.get("function", {}).get("name")) for m in request.messages if m.get("role") == "assistant"
                  for call in m.get("tool_calls") or [] if isinstance(call, dict)} if len(names) > 1 else set()
        offered = None
        for spec in request.tools:
            function = spec.get("function") if isinstance(spec, dict) else None
            fname = function.get("name") if isinstance(function, dict) else None
            if not isinstance(fname, str) or fname not in names or fname in called:
                continue
            if offered is None or names.index(fname) < names.index(offered["function"]["name"]):
                offered = spec
        if offered is None:
            return None
        name = offered["function"]["name"]
        self._next_tool = name
        if name in TOOL_NAMES and is_server_tool_spec(offered):
            return msgspec.json.encode(_server_tool_arguments(name, request)).decode()
        function = offered["function"]
        return msgspec.json.encode(_sample_value(function.get("parameters") or {"type": "object"})).decode()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        """Yield the scripted chunks. Raises :class:`UpstreamError` at ``fail_at``."""
        for step in self._script(request):
            if step.__class__ is _Pause:
                await asyncio.sleep(step.seconds)  # type: ignore[union-attr]
            else:
                yield step  # type: ignore[misc]

    async def generate_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        """The chunks of :meth:`generate`, one list per stretch between its pauses (as one read of a real
        upstream holds what arrived meanwhile): one chunk a list with ``delay_ms``, up to 64 without. What came
        before a simulated failure is yielded before it is raised. A subclass with its own ``generate`` (tests that
        record requests) gets that one's chunks, one a list."""
        if type(self).generate is not ScriptedUpstream.generate:
            async with contextlib.aclosing(self.generate(request)) as chunks:
                async for chunk in chunks:
                    yield [chunk]
            return
        batch: list[Chunk] = []
        try:
            for step in self._script(request):
                if step.__class__ is _Pause:
                    if batch:
                        yield batch
                        batch = []
                    await asyncio.sleep(step.seconds)  # type: ignore[union-attr]
                else:
                    batch.append(step)  # type: ignore[arg-type]
        except UpstreamError:
            if batch:
                yield batch
            raise
        if batch:
            yield batch

    def _script(self, request: GenerationRequest) -> Iterator[Chunk | _Pause]:
        """The chunks in order, with a :class:`_Pause` wherever the stream waits (``delay_ms``, or a turn of the
        event loop every 64 chunks)."""
        self._calls += 1
        input_tokens = sum(len(str(m.get("content") or "")) for m in request.messages) // 4 + 1
        arguments = self.tool_call_arguments(request)
        if arguments is not None:
            half = len(arguments) // 2
            call_id = f"call_scripted_{self._calls}"
            yield ToolCallDelta(0, call_id=call_id, name=self._next_tool, arguments=arguments[:half])
            yield ToolCallDelta(0, arguments=arguments[half:])
            yield Finish("tool_calls", Usage(input_tokens=input_tokens, output_tokens=1))
            return
        delay = _Pause(self.delay) if self.delay else None
        for i in range(self.reasoning):
            if delay is not None:
                yield delay
            yield ReasoningDelta(("" if i == 0 else " ") + "thinking")
        limit = self.deltas
        reason = "stop"
        if request.max_output_tokens is not None and request.max_output_tokens < limit:
            limit, reason = max(0, request.max_output_tokens), "length"
        fail_at = self.fail_at
        for i, chunk in enumerate(self._text[:limit]):
            if fail_at is not None and i >= fail_at:
                raise UpstreamError(
                    "upstream_error", f"{self.name}: simulated failure after {i} deltas", before_first_token=i == 0
                )
            if delay is not None:
                yield delay
            elif i % _YIELD_EVERY == _YIELD_EVERY - 1:
                yield _TURN
            yield chunk
        if fail_at is not None and fail_at == limit:
            raise UpstreamError(
                "upstream_error", f"{self.name}: simulated failure after {limit} deltas", before_first_token=limit == 0
            )
        yield Finish(reason, Usage(input_tokens=input_tokens, output_tokens=limit + self.reasoning))
