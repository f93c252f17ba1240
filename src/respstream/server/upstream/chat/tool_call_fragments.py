"""Chat Completions tool-call fragments (``delta.tool_calls[i]``) -> :class:`ToolCallDelta` values. No IO.

How this works: one :class:`ToolCallFragments` per generation, fed each fragment of ``choices[0]`` in order by the
:class:`~respstream.server.upstream.chat.stream.ChunkTranslator`. Fragments are keyed by their ``index``. The first
:class:`ToolCallDelta` of a call always carries ``call_id`` and the whole ``name``: some servers stream the name in
pieces, so name fragments are concatenated and the call starts only once its arguments begin (or at the end of the
stream, for a call without arguments); arguments that arrive before the name are held back, and a call without an
id gets a generated ``call_…`` id. Calls start in index order. An index reused with a *different* id (some servers
send every call as index 0) starts a new call instead of corrupting the previous one. A fragment without an index
continues the call its id names, else starts one (a new id) or continues the latest (no id).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from respstream.server.upstream.base import Chunk, ToolCallDelta

__all__ = ["ToolCallFragments"]


def _merge_name(held: str | None, fragment: str) -> str:
    """Add a name fragment. A fragment that repeats or extends everything so far replaces it: some servers resend
    the whole (or the growing) name with every fragment instead of the next piece."""
    if held and fragment.startswith(held):
        return fragment
    return (held or "") + fragment


@dataclass(slots=True)
class _Call:
    index: int  # our index, contiguous from 0
    call_id: str | None = None
    name: str | None = None
    pending: list[str] = field(default_factory=list)
    started: bool = False
    generated_id: bool = False


class ToolCallFragments:
    """The tool calls of one streamed completion; true once a fragment came. ``finish`` raises ValueError for a
    call that never got a name."""

    __slots__ = ("_calls", "_count")

    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}  # upstream index -> call
        self._count = 0  # tool calls seen, gives our indices

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, fragment: dict[str, Any], position: int, out: list[Chunk]) -> None:
        """One fragment (``position``: its place in the chunk's list); what it starts or continues goes to ``out``."""
        upstream_index = fragment.get("index")
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) and fragment.get("id") else None
        if not isinstance(upstream_index, int):
            # No index: a known id continues its call, a new id starts one, no id continues the latest call.
            known = [i for i, c in self._calls.items() if call_id and c.call_id == call_id]
            if known:
                upstream_index = known[0]
            elif call_id or not self._calls:
                upstream_index = max(self._calls) + 1 if self._calls else position
            else:
                upstream_index = max(self._calls)
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else None
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        call = self._calls.get(upstream_index)
        if call is not None and call_id and call.call_id and call_id != call.call_id and not call.generated_id:
            call = None  # same index, different id: a separate call (see module docstring)
        if call is None:
            call = _Call(index=self._count)
            self._count += 1
            self._calls[upstream_index] = call
        if not call.started:
            if call_id and call.call_id is None:
                call.call_id = call_id
            if name:
                call.name = _merge_name(call.name, name)
            if arguments:
                call.pending.append(arguments)
            # The name may come in pieces: it is complete once arguments begin (or at the end of the stream).
            if call.name and call.pending:
                self._start_through(call, out)
            return
        if arguments:
            out.append(ToolCallDelta(call.index, arguments=arguments))

    def finish(self, out: list[Chunk]) -> None:
        """End of stream: the calls not started yet (no arguments: their names are complete now), to ``out``."""
        for call in sorted(self._calls.values(), key=lambda c: c.index):
            if not call.name:
                raise ValueError(f"tool call #{call.index} never received a function name")
            if not call.started:
                out.append(self._start(call))

    def _start_through(self, call: _Call, out: list[Chunk]) -> None:
        """Start ``call``, and first every earlier named call still waiting, so calls start in index order."""
        for other in self._calls.values():
            if not other.started and other.name and other.index < call.index:
                out.append(self._start(other))
        out.append(self._start(call))

    @staticmethod
    def _start(call: _Call) -> ToolCallDelta:
        if call.call_id is None:
            call.call_id = f"call_{uuid.uuid4().hex[:24]}"
            call.generated_id = True
        call.started = True
        arguments = "".join(call.pending)
        call.pending.clear()
        return ToolCallDelta(call.index, call_id=call.call_id, name=call.name, arguments=arguments)
