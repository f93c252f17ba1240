"""An Anthropic Messages stream -> generation chunks: a sans-IO state machine fed the stream's parsed events.

How this works (the rules of ``providers/expected.json``, ``mapping.anthropic``): ``text_delta`` -> :class:`TextDelta`;
a ``tool_use`` block's ``input_json_delta`` fragments are gathered and given as one :class:`ToolCallDelta` when the
block stops (the pipeline acts on calls after ``Finish`` anyway), so a call cut mid-arguments is never presented
(``""`` -> ``{}``); ``thinking`` -> a passed-through ``reasoning`` item whose summary streams live and whose
``encrypted_content`` is the block's ``signature``; ``redacted_thinking`` -> a ``reasoning`` item with no summary
whose ``encrypted_content`` is the block's ``data``; ``server_tool_use`` + its ``*_tool_result`` -> a hosted-tool
item (``web_search_call``, else ``mcp_call``), never a client call. ``stop_reason`` -> the :class:`Finish` reason;
usage counts cache tokens into the input, the running totals taken last. An ``error`` event, or the end of the body
before ``message_stop``, sets :attr:`AnthropicStream.failure`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from respstream.server.upstream.base import (
    Chunk,
    Finish,
    PassedItemAdded,
    PassedItemDone,
    PassedItemEvent,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    Usage,
)
from respstream.server.upstream.provider_tools import ToolNames, call_arguments

__all__ = ["AnthropicStream", "usage_of"]

# stop_reason -> Finish.reason ("stop" also for end_turn, stop_sequence, pause_turn and reasons not known yet)
_FINISH: Final = {"max_tokens": "length", "model_context_window_exceeded": "length", "refusal": "content_filter"}
# An error event's type -> the HTTP status the API gives the same error (so retry and failover treat both alike)
_ERROR_STATUS: Final = {"overloaded_error": 529, "api_error": 500, "rate_limit_error": 429,
                        "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                        "not_found_error": 404, "request_too_large": 413}
_SUMMARY: Final = "response.reasoning_summary"


def _complete(arguments: str) -> bool:
    """Whether a call's arguments are whole JSON (a cut call's are not)."""
    try:
        json.loads(arguments)
    except ValueError:
        return False
    return True


class _Block:
    __slots__ = ("id", "kind", "name", "parts", "signature")

    def __init__(self, kind: str, block_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.id = block_id
        self.name = name
        self.parts: list[str] = []  # arguments fragments, or thinking text
        self.signature = ""


def usage_of(fields: dict[str, Any]) -> Usage:
    """Anthropic usage -> ours: cache writes and reads are part of the prompt; cached = cache reads."""
    cache_read = int(fields.get("cache_read_input_tokens") or 0)
    prompt = int(fields.get("input_tokens") or 0) + int(fields.get("cache_creation_input_tokens") or 0) + cache_read
    return Usage(input_tokens=prompt, output_tokens=int(fields.get("output_tokens") or 0), cached_tokens=cache_read)


class AnthropicStream:
    """Feed each parsed event (:meth:`event`), then :meth:`end` at the end of the body. ``done`` after
    ``message_stop``; ``failure`` set for an ``error`` event or a stream cut short (yield the chunks first, then
    raise it); ``streamed``: a chunk was given out."""

    def __init__(self, *, name: str, names: ToolNames | None = None, single_call: bool = False,
                 answer_tool: str | None = None) -> None:
        self.name = name
        self._names = names
        # (a server that forces a call by prefill repeats it until max_tokens: the first complete one ends the
        # stream, ``cut``; a tool_use named ``answer_tool`` is a structured answer: see prefill.py)
        self._single_call = single_call
        self._answer_tool = answer_tool
        self._called = False  # a tool_use block has started
        self.cut = False
        self.done = False
        self.streamed = False
        self.failure: UpstreamError | None = None
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._calls = 0
        self._servers: dict[str, int] = {}  # server tool_use id -> its block index (the passed item's key)
        self._server_inputs: dict[str, tuple[str, str]] = {}  # server tool_use id -> (query, arguments)
        self.events_seen = 0

    def event(self, data: Any) -> list[Chunk]:
        """The chunks one event gives (none once done or failed)."""
        self.events_seen += 1
        if self.done or self.failure is not None:
            return []
        if not isinstance(data, dict):
            return self._fail(UpstreamError("upstream_error", f"{self.name}: event {self.events_seen} is not a JSON "
                                            "object", before_first_token=not self.streamed))
        kind = data.get("type")
        out: list[Chunk]
        if kind == "content_block_delta":
            out = self._delta(data)
        elif kind == "content_block_start":
            out = self._cut() if self._single_call and self._called else self._start(data)
        elif kind == "content_block_stop":
            out = self._stop(data.get("index"))
        elif kind == "message_start":
            message = data.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._usage.update(usage if isinstance(usage, dict) else {})
            out = []
        elif kind == "message_delta":
            delta, usage = data.get("delta"), data.get("usage")
            if isinstance(delta, dict):
                self._stop_reason = delta.get("stop_reason") or self._stop_reason
            if isinstance(usage, dict):  # (running totals: the last value of each wins, never a sum)
                self._usage.update({k: v for k, v in usage.items() if v is not None})
            out = []
        elif kind == "message_stop":
            out = self._message_stop()
        elif kind == "error":
            out = self._error(data.get("error"))
        else:
            out = []  # ping, and event types added later
        if out:
            self.streamed = True
        return out

    def text_block(self, index: int) -> bool:
        """Whether ``index`` is an open text block (the body's text lane gives its deltas straight as text)."""
        block = self._blocks.get(index)
        return block is not None and block.kind == "text"

    def end(self) -> list[Chunk]:
        """The body ended. Without ``message_stop`` the response is cut short: ``failure`` is set."""
        if not self.done and self.failure is None:
            self._fail(UpstreamError("upstream_error", f"{self.name}: the stream ended before message_stop "
                                     f"(after {self.events_seen} events); the answer is incomplete",
                                     before_first_token=not self.streamed))
        return []

    # -- blocks ----------------------------------------------------------------------------------------------------

    def _start(self, data: dict[str, Any]) -> list[Chunk]:
        index, block = data.get("index"), data.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        kind = str(block.get("type"))
        state = self._blocks[index] = _Block(kind, str(block.get("id") or ""), str(block.get("name") or ""))
        if kind == "tool_use":
            self._called = True
            given = block.get("input")
            if isinstance(given, dict) and given:  # (a server that sends the input whole, no deltas)
                state.parts.append(json.dumps(given))
        elif kind == "thinking":
            state.signature = str(block.get("signature") or "")
            if block.get("thinking"):
                state.parts.append(str(block["thinking"]))
            return [PassedItemAdded(index, {"type": "reasoning", "id": f"rs_{index}", "summary": [],
                                            "status": "in_progress"})]
        elif kind == "redacted_thinking":
            data_blob = str(block.get("data") or "")
            item = {"type": "reasoning", "id": f"rs_{index}", "summary": [], "encrypted_content": data_blob}
            del self._blocks[index]
            return [PassedItemAdded(index, {**item, "status": "in_progress"}),
                    PassedItemDone(index, {**item, "status": "completed"})]
        elif kind == "server_tool_use":
            self._servers[state.id] = index
            if state.name == "web_search":
                return [PassedItemAdded(index, {"type": "web_search_call", "id": state.id, "status": "in_progress",
                                                "action": {"type": "search", "query": ""}}),
                        PassedItemEvent(index, "response.web_search_call.in_progress", {})]
            return [PassedItemAdded(index, {"type": "mcp_call", "id": state.id, "server_label": "anthropic",
                                            "name": state.name, "arguments": "", "status": "in_progress"})]
        elif kind.endswith("_tool_result"):
            del self._blocks[index]
            return self._server_result(block)
        return []

    def _delta(self, data: dict[str, Any]) -> list[Chunk]:
        delta = data.get("delta")
        state = self._blocks.get(data.get("index"))  # type: ignore[arg-type]
        if state is None or not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return [TextDelta(text)] if isinstance(text, str) and text else []
        if kind == "input_json_delta":
            state.parts.append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            text = str(delta.get("thinking") or "")
            if not text:
                return []
            state.parts.append(text)
            key = data["index"]
            fields = {"summary_index": 0, "delta": text}
            if len(state.parts) == 1:
                return [PassedItemEvent(key, f"{_SUMMARY}_part.added",
                                        {"summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                        PassedItemEvent(key, f"{_SUMMARY}_text.delta", fields)]
            return [PassedItemEvent(key, f"{_SUMMARY}_text.delta", fields)]
        elif kind == "signature_delta":
            state.signature += str(delta.get("signature") or "")
        return []  # citations_delta: the text stays exact; the citation is not an annotation here

    def _stop(self, index: Any) -> list[Chunk]:
        state = self._blocks.pop(index, None) if isinstance(index, int) else None
        if state is None:
            return []
        if state.kind == "tool_use":
            arguments = call_arguments("".join(state.parts))
            if state.name == self._answer_tool and self._answer_tool is not None:
                return [TextDelta(arguments)]  # (the structured answer: the pipeline validates it as text)
            if not _complete(arguments):
                return []  # a call cut mid-arguments (llama.cpp closes it at max_tokens): never presented
            name = self._names.from_provider(state.name) if self._names is not None else state.name
            self._calls += 1
            return [ToolCallDelta(self._calls - 1, call_id=state.id or None, name=name, arguments=arguments)]
        if state.kind == "thinking":
            return self._thinking_done(index, state, "completed")
        if state.kind == "server_tool_use":
            raw = call_arguments("".join(state.parts))
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            query = value.get("query") if isinstance(value, dict) else None
            self._server_inputs[state.id] = (query if isinstance(query, str) else "", raw)
            if state.name == "web_search":
                return [PassedItemEvent(index, "response.web_search_call.searching", {})]
        return []

    def _thinking_done(self, key: int, state: _Block, status: str) -> list[Chunk]:
        text = "".join(state.parts)
        # A summary part (empty when the block had no text) marks a thinking block: one without is redacted.
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{key}",
                                "summary": [{"type": "summary_text", "text": text}], "status": status}
        if state.signature:
            item["encrypted_content"] = state.signature
        out: list[Chunk] = []
        if text:
            part = {"type": "summary_text", "text": text}
            out += [PassedItemEvent(key, f"{_SUMMARY}_text.done", {"summary_index": 0, "text": text}),
                    PassedItemEvent(key, f"{_SUMMARY}_part.done", {"summary_index": 0, "part": part})]
        return [*out, PassedItemDone(key, item)]

    def _server_result(self, block: dict[str, Any]) -> list[Chunk]:
        tool_use_id = str(block.get("tool_use_id") or "")
        key = self._servers.pop(tool_use_id, None)
        if key is None:
            return []
        content = block.get("content")
        failed = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        query, arguments = self._server_inputs.pop(tool_use_id, ("", "{}"))
        if str(block.get("type")) == "web_search_tool_result":
            sources = [{"type": "url", "url": r["url"]} for r in content or []
                       if isinstance(r, dict) and isinstance(r.get("url"), str)] if isinstance(content, list) else []
            item = {"type": "web_search_call", "id": tool_use_id, "status": "failed" if failed else "completed",
                    "action": {"type": "search", "query": query, "sources": sources}}
            done: list[Chunk] = [] if failed else [PassedItemEvent(key, "response.web_search_call.completed", {})]
            return [*done, PassedItemDone(key, item)]
        output = json.dumps(content)
        return [PassedItemDone(key, {"type": "mcp_call", "id": tool_use_id, "server_label": "anthropic",
                                     "name": block.get("type", ""), "arguments": arguments, "status":
                                     "failed" if failed else "completed",
                                     **({"error": output} if failed else {"output": output})})]

    # -- the end ---------------------------------------------------------------------------------------------------

    def _message_stop(self) -> list[Chunk]:
        out: list[Chunk] = []
        for index, state in sorted(self._blocks.items()):  # still open at the end (max_tokens mid-block)
            if state.kind == "thinking":
                out += self._thinking_done(index, state, "incomplete")
            elif state.kind == "server_tool_use":
                out.append(PassedItemDone(index, {"type": "web_search_call", "id": state.id, "status": "failed",
                                                  "action": {"type": "search", "query": ""}}))
            # an unclosed tool_use is a call cut mid-arguments: left out, never presented as a call to run
        self._blocks.clear()
        self.done = True
        reason = _FINISH.get(self._stop_reason or "", "tool_calls" if self._calls else "stop")
        out.append(Finish(reason=reason, usage=usage_of(self._usage)))
        return out

    def _cut(self) -> list[Chunk]:
        """The next block after a forced call (``single_call``): the call ends the stream, as a server that stops
        after it would have. The output tokens are those the server reported so far (llama.cpp: none)."""
        out: list[Chunk] = []
        for index in sorted(self._blocks):
            out += self._stop(index)
        self.cut = True
        return out + self._message_stop()

    def _error(self, error: Any) -> list[Chunk]:
        error = error if isinstance(error, dict) else {}
        kind = str(error.get("type") or "error")
        message = str(error.get("message") or "")
        return self._fail(UpstreamError("upstream_error", f"{self.name}: upstream {kind}: {message}",
                                        status=_ERROR_STATUS.get(kind, 502), before_first_token=not self.streamed))

    def _fail(self, failure: UpstreamError) -> list[Chunk]:
        self.failure = failure
        return []
