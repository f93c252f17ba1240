"""Tool calls a model wrote as text in a Messages ``text`` block, turned into real calls: for llama.cpp's
``/v1/messages`` (``anthropic+embedded``) only, never a real Anthropic upstream (Claude's ``tool_use`` is native).

Why (measured on loopback, xllamacpp 2026.10.11549, Qwen2.5-Coder 0.5B and 1.5B; docs/gateway.md, anthropic+embedded):
llama.cpp renders the tools into the prompt, but with ``tool_choice`` auto the model often writes its call as JSON
text (bare, fenced or Hermes-style ``<tool_call>{...}</tool_call>``) that llama.cpp does not parse, so no ``tool_use``
block comes back. The recognition is the shared :class:`~respstream.server.upstream.text_tool_calls.TextToolCalls`
(the Chat Completions path's, same rules): only a call to a tool the body offered, with arguments that are whole JSON
fitting its schema; anything else stays text, and text is held back only while it may still become a call.

What this adds for the Messages API: the tools are the ones in the body actually sent (provider names, so a
namespace tool's flattened name maps back; ``tool_choice`` none leaves none there, ``allowed_tools`` only the
allowed), calls the history already answered are named the provider's way, and calls are numbered in stream
order whether native (``tool_use``) or written.
"""

from __future__ import annotations

from typing import Any

from respstream.server.upstream.base import Chunk, GenerationRequest, ToolCallDelta, singles
from respstream.server.upstream.provider_tools import ToolNames
from respstream.server.upstream.text_tool_calls import TextToolCalls, answered_calls

__all__ = ["WrittenCalls", "written_calls_of"]


class WrittenCalls:
    """One generation's reader: :meth:`read` takes the chunks of one read of the stream and gives what to emit now."""

    __slots__ = ("_detector", "_made", "_names")

    def __init__(self, detector: TextToolCalls, names: ToolNames) -> None:
        self._detector = detector
        self._names = names
        self._made = 0  # calls given out so far, native and written: each is one ToolCallDelta, numbered in order

    def read(self, batch: list[Chunk]) -> list[Chunk]:
        out: list[Chunk] = []
        for chunk in singles(batch):
            if isinstance(chunk, ToolCallDelta):  # a native tool_use (its name already restored)
                out.append(self._numbered(chunk, chunk.name))
                continue
            for made in self._detector.take(chunk):
                if isinstance(made, ToolCallDelta):
                    made = self._numbered(made, self._names.from_provider(made.name or ""))
                out.append(made)
        return out

    def _numbered(self, call: ToolCallDelta, name: str | None) -> ToolCallDelta:
        self._made += 1
        return ToolCallDelta(self._made - 1, call_id=call.call_id, name=name, arguments=call.arguments)


def written_calls_of(body: dict[str, Any], request: GenerationRequest, names: ToolNames,
                     skip: frozenset[str] = frozenset()) -> WrittenCalls | None:
    """A reader for the stream of ``body`` (a ``POST /v1/messages`` body as sent), or None when it offers no client
    tool (``skip``: tool names that are not client tools, such as a structured-output answer tool)."""
    functions = {str(tool["name"]): tool["input_schema"] for tool in body.get("tools") or ()
                 if isinstance(tool, dict) and isinstance(tool.get("input_schema"), dict)
                 and tool.get("name") not in skip}
    if not functions:
        return None
    answered = {(names.to_provider(name), arguments) for name, arguments in answered_calls(request.messages)}
    return WrittenCalls(TextToolCalls(functions, answered=answered), names)

