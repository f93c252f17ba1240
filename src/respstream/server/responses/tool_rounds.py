"""Tool rounds of a response: which tools the model is offered, and what happens to the calls it makes.

How this works: a mixin of :class:`~respstream.server.responses.pipeline.Pipeline`. A round that ends in tool calls goes
through :meth:`ToolRounds._handle_calls`: ``parallel_tool_calls: false`` keeps the first call, ``max_tool_calls``
drops the calls past it (never run), the open message is closed (rewritten, with its citations), then each call is
a client function call (the item, for the caller to run: the response ends), a remote MCP call (run, or an approval
request that ends the response), or a server tool (announced, run, finished with output and status). A server tool
that raises instead of returning a failed result is a broken tool: :class:`ToolCrashed` ends the response with
``tool_error``. A forced or required ``tool_choice`` holds for the first round only.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from respstream.server.events.writer import ResponseWriter
from respstream.server.inputs.history import kept_reasoning
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.responses.citations import CitationSources, Source
from respstream.server.responses.forced_call import ForcedCallMissing, forced_call
from respstream.server.telemetry.response import ResponseTelemetry
from respstream.server.tools.mcp_tools import McpToolbox
from respstream.server.upstream.base import Finish
from respstream.server.upstream.provider_tools import REASONING_KEY

if TYPE_CHECKING:
    from respstream.server.responses.collaborators import ToolsLike

__all__ = ["RoundResult", "ToolCall", "ToolCrashed", "ToolRounds"]

log = logging.getLogger("respstream.server")


class ToolCrashed(Exception):
    """A server tool raised instead of returning a failed result: the response ends with ``tool_error``."""


@dataclass(slots=True)
class ToolCall:
    """One tool call of a round, its arguments as the upstream streamed them."""

    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RoundResult:
    """What one upstream generation ended with: why, its text, and its tool calls (in index order)."""

    finish: Finish
    text: str
    calls: list[ToolCall]


class ToolRounds:
    """The tool half of the pipeline (a mixin: it shares the pipeline's state)."""

    writer: ResponseWriter
    request: ResponseRequest
    decision: Any
    messages: list[dict[str, Any]]
    tools: ToolsLike
    telemetry: ResponseTelemetry
    mcp: McpToolbox | None
    server_tools: set[str]
    client_tools: dict[str, dict[str, Any]]
    calls_left: int | None
    _usage: Any
    _round_no: int
    round_output_from: int  # where this round's output items start in the writer's output
    _on_tool: Any
    _last_tool_status: str
    _sources: CitationSources
    _last_results: list[Source]

    if TYPE_CHECKING:
        async def _rewrite(self, text: str) -> str: ...
        def _citations(self, text: str) -> list[dict[str, Any]]: ...

    def _tool_specs(self) -> list[dict[str, Any]]:
        specs: list[dict[str, Any]] = []
        # An upstream may decline server tools (the embedded models: a small model offered web_search calls it for
        # every question, and the specs cost ~1,300 prompt tokens a round); grounding runs them for it instead.
        if getattr(self.decision.upstream, "offer_server_tools", True):
            specs = [s for s in self.tools.specs() if s.get("function", {}).get("name") in self.server_tools]
        for tool in self.client_tools.values():
            specs.append({"type": "function", "function": {
                "name": tool["name"], "description": tool.get("description") or "",
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}})
        if self.mcp is not None:
            specs.extend(self.mcp.specs())
        return specs

    def _chat_tool_choice(self) -> Any:
        """``tool_choice`` for the upstream. A forced or required choice holds for the first round only: once the
        model has called, the next round must be free to answer (else a forced tool would loop to the round limit)."""
        policy = self.request.tool_policy
        if self._round_no > 0 and policy.mode == "required":
            return "auto"
        return policy.chat_tool_choice()

    async def _handle_calls(self, result: RoundResult) -> bool:
        """Run server calls, emit client calls. True when the response ends here (a client call is pending)."""
        w = self.writer
        if not self.request.parallel_tool_calls:
            result.calls = result.calls[:1]  # parallel_tool_calls: false -> one call per turn, whatever the model did
        if self.calls_left is not None:
            result.calls = result.calls[: self.calls_left]  # calls past max_tool_calls are dropped, never run
            self.calls_left -= len(result.calls)
        if w.open_message_text is not None:
            text = w.open_message_text if result.finish.text is None else result.finish.text
            final = await self._rewrite(text)
            w.close_message(final, annotations=self._citations(final))
        else:
            w.close_message()
        chat_calls = [{"id": c.call_id, "type": "function",
                       "function": {"name": c.name, "arguments": "".join(c.arguments) or "{}"}} for c in result.calls]
        message: dict[str, Any] = {"role": "assistant", "content": result.text or None, "tool_calls": chat_calls}
        # A provider's signed reasoning of this round goes back with the calls (Anthropic refuses a tool loop
        # without it: upstream/provider_tools.py REASONING_KEY)
        kept = kept_reasoning(w.response.get("output", [])[self.round_output_from:])
        if kept:
            message[REASONING_KEY] = kept
        self.messages.append(message)
        client_pending = False
        for call in result.calls:
            arguments = "".join(call.arguments)
            if call.name in self.client_tools:
                w.client_tool_call(call_id=call.call_id, name=call.name, arguments=arguments,
                                   tool=self.request.client_kinds.get(call.name))
                client_pending = True
                continue
            if self.mcp is not None and call.name in self.mcp.by_tool:
                if self.mcp.needs_approval(call.name):
                    self.mcp.request_approval(w, call.name, arguments)
                    client_pending = True  # the response ends; the approval comes with the next request
                    continue
                output = await self.mcp.call(w, call.name, arguments)
                self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": output})
                continue
            output = await self._run_server_tool(call.call_id, call.name, arguments)
            if call.name == "web_search" and self._last_results:
                output = self._sources.prompt_block(self._last_results)  # numbered: the model can cite [n]
            self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": output})
        await w.flush()
        return client_pending

    def _forced_call_from_text(self, result: RoundResult) -> bool:
        """The first round ended in text while ``tool_choice`` forced a client call: end the response with that
        call (its arguments from the text) or as failed saying why. True when the response ended here."""
        if self.calls_left == 0:
            return False
        w = self.writer
        text = w.open_message_text
        if result.finish.text is not None and text is not None:
            text = result.finish.text
        try:
            call = forced_call(text or result.text, self.request.tool_policy, self.client_tools, self.server_tools,
                               self.request.client_kinds, called=self._server_calls > 0)
        except ForcedCallMissing as exc:
            w.close_message(text, status="incomplete")
            w.fail("tool_choice_not_followed", str(exc))
            return True
        if call is None:
            return False
        w.close_message(text)
        name, arguments = call
        w.client_tool_call(call_id=f"call_{w.record.id[-8:]}_forced", name=name, arguments=arguments,
                           tool=self.request.client_kinds.get(name))
        w.complete(usage=self._usage)
        return True

    _server_calls = 0  # server tool calls run so far (grounding included): they meet a "required" tool_choice

    async def _run_server_tool(self, call_id: str, name: str, arguments: str) -> str:
        w = self.writer
        self._server_calls += 1
        index = w.server_tool_started(call_id=call_id, name=name, arguments=arguments, query=_query(arguments))
        await w.flush()
        crashed: Exception | None = None
        with self.telemetry.tool(name, call_id, arguments) as outcome:
            if name not in self.server_tools:
                output, status = f"unknown tool {name!r}", "failed"
            else:
                try:
                    result = await self.tools.run(name, arguments)
                    output, status = result.output, result.status
                except Exception as exc:  # tools report failures as results; an exception is a broken tool
                    log.exception("server tool %s raised", name)
                    crashed = exc
                    output, status = f"the {name} tool crashed ({type(exc).__name__})", "failed"
            outcome["status"] = status
        self._last_tool_status = status
        self._last_results = self._sources.add_results(output) if name == "web_search" and status == "completed" \
            else []
        if self._on_tool is not None:
            self._on_tool(name, status)
        w.server_tool_finished(index, output=output, status=status, sources=_sources(output) if name == "web_search"
                               else None)
        await w.flush()
        if crashed is not None:
            raise ToolCrashed(output) from crashed
        return output


def _query(arguments: str) -> str | None:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the interpreter's stack
        return None
    query = value.get("query") if isinstance(value, dict) else None
    return query if isinstance(query, str) else None


def _sources(output: str) -> list[str]:
    try:
        value = json.loads(output)
    except (ValueError, RecursionError):
        return []
    if isinstance(value, dict):
        value = value.get("results", [])
    if not isinstance(value, list):
        return []
    return [r["url"] for r in value if isinstance(r, dict) and isinstance(r.get("url"), str)]
