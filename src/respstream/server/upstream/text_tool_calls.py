"""Tool calls that a model wrote as answer text, turned into real tool calls. No IO.

Small models served by llama.cpp often answer a tool request with the call as text: ``{"name": "get_weather",
"arguments": {"city": "Paris"}}``, perhaps inside a ```json fence or ``<tool_call>…</tool_call>`` tags, instead of
``tool_calls``. :class:`TextToolCalls` watches the start of the answer and decides early:

1. Leading whitespace is held. The first other characters decide: ``{``, a fence opening (```` ``` ````,
   ```` ```json ````) followed by ``{``, or ``<tool_call>`` make a *candidate*; anything else is ordinary text, and
   everything held is released at once and the rest passes straight through (so answer text waits only for its
   first few characters).
2. A candidate must start like a call within ``max_header`` characters: ``{"name": "<an offered tool>"`` (also
   ``"function"``/``"tool"`` as the key). Otherwise it is released as text.
3. Then the JSON object is scanned to its closing brace with a small state machine (strings, escapes, depth), each
   character once. The object must parse, name an offered tool and carry arguments (``arguments`` or
   ``parameters``, an object or a JSON string of one) that satisfy the tool's JSON schema
   (:func:`~respstream.server.upstream.tool_schemas.schema_errors`). Then it becomes a :class:`ToolCallDelta` and the
   round's :class:`Finish` says ``tool_calls``; a closing fence or tag after it is dropped, other text after it is
   kept as text. If anything fails, the held text is released unchanged: nothing is ever lost.

A call wrapped in one extra pair of braces, ``{{"name": ..., "arguments": {...}}}``, counts as the call inside: that
is how Qwen2.5's own chat template shows the call format to the model (the braces are literal in its prompt text), and
the model copies them (measured: Qwen2.5-Coder-1.5B under ``tool_choice`` auto). A JSON list of such objects becomes
several calls. An answer that starts with a short lead-in (the fence within
1,024 characters, at most 8 fences tried) and then a fenced or tagged call is streamed as text at once, and the
call is added at the end of the text (the text is kept as well: the client already has it). A call identical to one the
conversation already has a result for (:func:`answered_calls`) stays text: a model echoing its history must not
start a tool loop.
Cost is linear in the text: each character is scanned once, held text is joined once.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from respstream.server.upstream.base import Chunk, Finish, TextDelta, ToolCallDelta
from respstream.server.upstream.tool_schemas import schema_errors

__all__ = ["TextToolCalls", "answered_calls", "text_tool_call_stream", "written_call"]

_HEADER = re.compile(
    r'\s*(?:```[A-Za-z]*\s*|<tool_call>\s*)?[\[{]\s*(?:\{\s*)?"(?:name|function|tool)"\s*:\s*"([^"\\]{0,128})"'
)
_FIRST_KEY = re.compile(r'\s*(?:```[A-Za-z]*\s*|<tool_call>\s*)?[\[{]\s*(?:\{\s*)?"([^"\\]{0,64})"\s*:')
_CALL_KEYS = ("name", "function", "tool")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_OPENERS = ("```", "<tool_call>")
_FIRST_BRACKET = re.compile(r"[\[{]")
_MAX_LEAD_IN = 1024  # a fenced call must start within this many characters of the answer to count as one
_LEAD_IN = re.compile(r"(?:```[A-Za-z]*\s*|<tool_call>\s*)(?=[\[{])")
_TRAILERS = re.compile(r"^(?:\s|```|</tool_call>|[,\]])*$")


def written_call(text: str, names: set[str]) -> bool:
    """True when the whole of ``text`` is a tool call written out (a JSON object, or list of them, naming one of
    ``names``, optionally fenced or tagged): what a model not offered that tool printed instead of an answer."""
    body = text.strip()
    if not body or body[0] not in "{[<`" or len(body) > 64 * 1024:
        return False
    body = _unwrapped(body)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return False
    objects = value if isinstance(value, list) else [value]
    return bool(objects) and all(isinstance(o, dict) and o.get("name") in names for o in objects)


def _unwrapped(body: str) -> str:
    """``body`` without one leading fence (```` ```lang ````) or ``<tool_call>`` and one trailing fence or
    ``</tool_call>``. Slices, not ``re.sub``: a ``\\s*`` anchored at the end is tried at every position of a long
    whitespace run (quadratic in model output, issue 42 H2v)."""
    if body.startswith("```"):
        start = 3
        while start < len(body) and body[start] in _LETTERS:
            start += 1
        body = body[start:].lstrip()
    elif body.startswith("<tool_call>"):
        body = body[len("<tool_call>"):].lstrip()
    for closer in ("```", "</tool_call>"):
        if body.endswith(closer):
            return body[: -len(closer)].strip()
    return body.strip()


def _loads_call(text: str) -> Any:
    """``text`` parsed as JSON, or, when it is ``{{...}}`` (never valid JSON), the object inside the outer braces
    (see the module docstring). Raises ValueError."""
    try:
        return json.loads(text)
    except ValueError:
        if not (text.startswith("{{") and text.endswith("}}")):
            raise
    return json.loads(text[1:-1])


class _ObjectScanner:
    """Finds where the top-level JSON value that starts at the first ``{`` or ``[`` ends; fed piece by piece."""

    def __init__(self) -> None:
        self.depth = 0
        self.started = False
        self.in_string = False
        self.escaped = False
        self.end: int | None = None  # offset (in everything fed) just after the value's closing bracket
        self._offset = 0

    def feed(self, text: str) -> None:
        if self.end is not None:
            return
        for i, ch in enumerate(text):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
            elif ch == '"':
                self.in_string = self.started
            elif ch in "{[":
                self.started = True
                self.depth += 1
            elif ch in "}]" and self.started:
                self.depth -= 1
                if self.depth == 0:
                    self.end = self._offset + i + 1
                    break
        self._offset += len(text)


class TextToolCalls:
    """One generation's detector. ``functions``: offered function name -> parameters schema (empty: pass-through).

    :meth:`feed` takes a text delta and returns the chunks to emit now; :meth:`finish` flushes at the end of the
    text. ``calls`` counts the calls made. ``reason`` says why held text was released (for logs and tests).
    """

    def __init__(self, functions: dict[str, dict[str, Any]], *, max_header: int = 200, max_call: int = 64 * 1024,
                 answered: set[tuple[str, str]] | None = None):
        self.functions = functions
        # (name, canonical arguments) of calls this conversation already has results for: a model that writes one
        # of them again after its result is echoing history, and turning that into a call would loop forever.
        self.answered = answered or set()
        self.max_header = max_header
        self.max_call = max_call
        self._state = "deciding" if functions else "text"
        self._held: list[str] = []
        self._held_len = 0
        self._scanner = _ObjectScanner()
        self.calls = 0
        self.reason: str | None = None
        # Answer text that began with prose is passed on at once, but kept (up to max_call) in case the prose is a
        # short lead-in to a fenced call ("You can use this call: ```json {...}```"), checked at finish().
        self._watch = False
        self._seen: list[str] = []
        self._seen_len = 0

    @property
    def passthrough(self) -> bool:
        return self._state == "text" and not self._watch

    def _release(self, reason: str) -> list[Chunk]:
        self._state = "text"
        self.reason = reason
        self._watch = reason == "answer text"
        if self._watch:
            self._seen = list(self._held)
            self._seen_len = self._held_len
        text = "".join(self._held)
        self._held.clear()
        return [TextDelta(text)] if text else []

    def feed(self, text: str) -> list[Chunk]:
        if self._state == "text":
            if self._watch:
                self._seen.append(text)
                self._seen_len += len(text)
                self._watch = self._seen_len <= self.max_call
            return [TextDelta(text)] if text else []
        self._held.append(text)
        self._held_len += len(text)
        if self._state == "deciding":
            return self._decide()
        if self._state == "after":
            return self._after()
        self._scanner.feed(text)
        return self._maybe_done()

    def _decide(self) -> list[Chunk]:
        if len(self._held) > 1 and self._held[-1].isspace() and self._held[0].isspace():
            return []  # still only whitespace: not re-joined per delta (that would be quadratic in a long run)
        held = "".join(self._held)
        self._held = [held]  # deciding joins at most max_header characters past the lead: bounded per delta
        start = held.lstrip()
        if not start:
            return []
        if start[0] not in "{[" and not any(o.startswith(start[: len(o)]) or start.startswith(o) for o in _OPENERS):
            return self._release("answer text")
        match = _HEADER.match(held)
        if match is None:
            key = _FIRST_KEY.match(held)
            if key is not None and key.group(1) not in _CALL_KEYS:
                return self._release(f"an object whose first key is {key.group(1)!r}")
            if len(held) >= self.max_header or self._went_another_way(start):
                return self._release("not a tool call")
            return []
        if match.group(1) not in self.functions:
            return self._release(f"names no offered tool ({match.group(1)!r})")
        self._state = "call"
        self._scanner.feed(held)
        return self._maybe_done()

    @staticmethod
    def _went_another_way(start: str) -> bool:
        """An opener that became something else: ```` ```python\nprint ```` or ``<b>``, or a bracket then text."""
        if start.startswith("```"):
            rest = start[3:].lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ").strip()
            return bool(rest) and rest[0] not in "{["
        if start.startswith("<"):
            return not ("<tool_call>".startswith(start[:11]) or start.startswith("<tool_call>"))
        if start[0] not in "{[":
            return not "```".startswith(start)  # "`" or "``": a fence may still be coming
        body = start.lstrip("[{ \t\r\n")
        return bool(body) and body[0] != '"'

    def _maybe_done(self) -> list[Chunk]:
        if self._scanner.end is None:
            if self._held_len > self.max_call:
                return self._release("call text too long")
            return []
        held = "".join(self._held)
        end = self._scanner.end
        first = _FIRST_BRACKET.search(held)
        begin = first.start() if first else 0
        try:
            value = _loads_call(held[begin:end])
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the interpreter's stack
            return self._release("not valid JSON")
        objects = value if isinstance(value, list) else [value]
        calls: list[Chunk] = []
        for position, obj in enumerate(objects):
            call = self._call(obj, self.calls + position)
            if isinstance(call, str):
                return self._release(call)
            calls.append(call)
        if not calls:
            return self._release("an empty list")
        self.calls += len(calls)
        self._state = "after"
        rest = held[end:]
        self._held = [rest]
        self._held_len = len(rest)
        return calls + self._after()

    def _after(self) -> list[Chunk]:
        """Text after a recognised call: a closing fence or tag is dropped (at :meth:`finish`); real text is kept."""
        if self._held_len <= self.max_header:
            return []
        rest = "".join(self._held)
        self._held.clear()
        self._state = "text"
        return [TextDelta(rest)]

    def _call(self, obj: Any, index: int) -> ToolCallDelta | str:
        if not isinstance(obj, dict):
            return "not a JSON object"
        function = obj.get("function")
        name = obj.get("name") or obj.get("tool") or (function.get("name") if isinstance(function, dict) else function)
        if not isinstance(name, str) or name not in self.functions:
            return f"names no offered tool ({name!r})"
        source = function if isinstance(function, dict) else obj
        arguments = source.get("arguments", source.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                return "arguments are not JSON"
        if not isinstance(arguments, dict):
            return "arguments are not an object"
        errors = schema_errors(arguments, self.functions[name])
        if errors:
            return f"arguments do not fit the schema: {errors[0]}"
        if (name, json.dumps(arguments, sort_keys=True)) in self.answered:
            return "repeats a call that already has its result"
        return ToolCallDelta(index, call_id=f"call_{uuid.uuid4().hex[:24]}", name=name,
                             arguments=json.dumps(arguments, ensure_ascii=False))

    def take(self, chunk: Chunk) -> list[Chunk]:
        """Any chunk of the generation -> the chunks to emit now: text through :meth:`feed`; a :class:`Finish` after
        what :meth:`finish` releases, its reason ``tool_calls`` when calls were made and the model just stopped;
        anything else as it is."""
        if isinstance(chunk, TextDelta):
            return [chunk] if self.passthrough else self.feed(chunk.text)
        if isinstance(chunk, Finish):
            out = self.finish()
            if self.calls and chunk.reason == "stop":
                chunk = msgspec.structs.replace(chunk, reason="tool_calls")
            out.append(chunk)
            return out
        return [chunk]

    def finish(self) -> list[Chunk]:
        """End of the text: release whatever is still held (a call that never closed is text after all)."""
        if self._state == "after":
            rest = "".join(self._held)
            self._held.clear()
            self._state = "text"
            if _TRAILERS.match(rest):
                return []
            return [TextDelta(rest)]
        if self._state in ("deciding", "call"):
            return self._release("the answer ended before the call did")
        if self._watch:
            self._watch = False
            return self._lead_in_call("".join(self._seen))
        return []

    def _lead_in_call(self, text: str) -> list[Chunk]:
        """A fenced or tagged call after a short lead-in (the fence within ``_MAX_LEAD_IN`` characters): the calls,
        emitted after the text (which the client already has), else nothing."""
        value: Any = None
        for number, opener in enumerate(_LEAD_IN.finditer(text, 0, _MAX_LEAD_IN)):
            if number >= 8:
                return []  # bounded: at most 8 candidate fences, each scanned once
            scanner = _ObjectScanner()
            scanner.feed(text[opener.end():])
            if scanner.end is None:
                continue
            try:
                value = _loads_call(text[opener.end():opener.end() + scanner.end])
            except (ValueError, RecursionError):
                continue
            objects = value if isinstance(value, list) else [value]
            if all(isinstance(self._call(o, 0), ToolCallDelta) for o in objects):
                break
            value = None
        if value is None:
            return []
        calls: list[Chunk] = []
        for position, obj in enumerate(value if isinstance(value, list) else [value]):
            call = self._call(obj, self.calls + position)
            if isinstance(call, str):
                return []
            calls.append(call)
        self.calls += len(calls)
        return calls


def answered_calls(messages: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(name, canonical arguments) of the assistant tool calls in ``messages`` that a ``tool`` message answered."""
    answered_ids = {m.get("tool_call_id") for m in messages if isinstance(m, dict) and m.get("role") == "tool"}
    out: set[tuple[str, str]] = set()
    for message in messages:
        for call in (message.get("tool_calls") or []) if isinstance(message, dict) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or call.get("id") not in answered_ids:
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (TypeError, ValueError, RecursionError):
                continue
            out.add((str(function.get("name")), json.dumps(arguments, sort_keys=True)))
    return out


async def text_tool_call_stream(
    chunks: AsyncIterator[Chunk], functions: dict[str, dict[str, Any]], answered: set[tuple[str, str]] | None = None
) -> AsyncIterator[Chunk]:
    """Pass ``chunks`` through :class:`TextToolCalls` (see the module docstring)."""
    detector = TextToolCalls(functions, answered=answered)
    async for chunk in chunks:
        if chunk.__class__ is TextDelta and detector.passthrough:
            yield chunk
            continue
        for out in detector.take(chunk):
            yield out
