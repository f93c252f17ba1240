"""The ground-first step: before the first round, one server tool runs and the model is given its result.

Why: a model too small to call tools still answers from the right facts.
:func:`~respstream.server.routing.router.ground_first` picks the tool from the input and the route (arithmetic ->
``calculator``, a time question -> ``current_datetime``, the ``retrieval`` route -> ``web_fetch`` for a URL or
``web_search``). Only for a routed (not pinned) request, a tool enabled for the request, fresh user input (not a
``function_call_output`` continuation), and once per response; and never the retrieval route's search or fetch when the
request brings client function tools (an agent's turn: the model calls those, or a server tool itself when it needs
one). A computed result (calculator, current_datetime) also goes to the model as a system instruction to state it
(:func:`~respstream.server.responses.grounded_answer.grounding_instruction`) and becomes a
:class:`~respstream.server.responses.grounded_answer.Fact` the final text is checked against.

A mixin of :class:`~respstream.server.responses.pipeline.Pipeline`; the tool call itself is announced, run and
finished like any other (:meth:`~respstream.server.responses.tool_rounds.ToolRounds._run_server_tool`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from respstream.server.events.writer import ResponseWriter
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.responses.citations import CitationSources, Source
from respstream.server.responses.grounded_answer import Fact, grounding_instruction
from respstream.server.routing.router import ground_first
from respstream.server.tools.search_query import search_query

__all__ = ["GroundFirst"]

_RETRIEVAL_TOOLS = ("web_search", "web_fetch")  # what the retrieval route runs first; skipped for client-tool turns


class GroundFirst:
    """The ground-first half of the pipeline (a mixin: it shares the pipeline's state)."""

    writer: ResponseWriter
    request: ResponseRequest
    decision: Any
    pinned: bool
    messages: list[dict[str, Any]]
    server_tools: set[str]
    client_tools: dict[str, dict[str, Any]]
    calls_left: int | None
    _facts: list[Fact]
    _last_tool_status: str
    _sources: CitationSources
    _last_results: list[Source]

    if TYPE_CHECKING:
        async def _run_server_tool(self, call_id: str, name: str, arguments: str) -> str: ...

    def _fresh_user_turn(self) -> bool:
        """True when the request ends with new user input. A turn that carries tool results (a client's
        ``function_call_output`` continuation) already has what it needs: searching again would search for the
        tool's output. (Within one response the search runs once, before the first round, never per tool round.)"""
        last = self.request.input[-1] if self.request.input else None
        return last is not None and last.type == "message" and last.role == "user"

    def _grounding(self) -> tuple[str, dict[str, str]] | None:
        """The server tool to run before the first round and its arguments, or None (see the module docstring).
        A tool the request does not enable is skipped; the retrieval route then still searches when it may."""
        if self.pinned or not self._fresh_user_turn() or self.calls_left == 0:
            return None
        text = self.request.input_text
        category = str(getattr(self.decision, "category", ""))
        chosen = ground_first(text, category)
        if self.client_tools and (chosen is None or chosen[0] in _RETRIEVAL_TOOLS):
            # A request with client tools is an agent's turn: the model is about to call one of them, and a search
            # (29-53 s with the embedded model and a web provider) would only delay that call and put a server tool
            # item in front of it. The model is still offered the server tools and may search when it needs to.
            # A computed fact (calculator, current_datetime) costs milliseconds and stays.
            return None
        if chosen is not None and chosen[0] in self.server_tools:
            return chosen
        if category == "retrieval" and "web_search" in self.server_tools:
            return "web_search", {"query": search_query(text)}
        return None

    async def _ground_first(self, name: str, arguments: dict[str, str]) -> None:
        """Run ``name`` as a server tool call (announced, run, finished like any other) and put its output in front
        of the model, so even a model that never calls tools answers from it.

        How the model gets it: a computed answer (``calculator``, ``current_datetime``) comes as the result of the
        model's own call, which small models repeat faithfully. Search and fetch results are context rather than the
        answer, and a request with client function tools must leave the model free to call them (a trailing tool
        result reads as "tools done, now answer"): those get a system note before the user's message instead."""
        call_id = f"call_{self.writer.record.id[-12:]}_{'search' if name == 'web_search' else 'ground'}"
        if self.calls_left is not None:
            self.calls_left -= 1
        arguments_json = json.dumps(arguments)
        output = await self._run_server_tool(call_id, name, arguments_json)
        if name in ("calculator", "current_datetime") and self._last_tool_status == "completed":
            # A computed answer: the model is told to state it (a system note before the question), and the final
            # text is checked against it (GroundedFacts, in _rewrite).
            fact = Fact(name, dict(arguments), output)
            self._facts.append(fact)
            self.messages.insert(len(self.messages) - 1 if self.messages else 0,
                                 {"role": "system", "content": grounding_instruction(fact)})
        offered = getattr(self.decision.upstream, "offer_server_tools", True)
        if name in ("calculator", "current_datetime") and not self.client_tools and offered:
            # A model that calls tools sees the result as its own call's (small models repeat it faithfully). One
            # that is not offered the gateway's tools gets only the note: shown a call, it writes calls as text.
            self.messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_json}}]})
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            return
        if name in ("calculator", "current_datetime") and self._facts:
            return  # the system note above already carries the result
        if name == "web_search":
            found = self._sources.prompt_block(self._last_results) if self._last_results else output
            note = (f"Web search results for the user's question:\n{found}\n"
                    "Answer using these results. Cite a result by its number in square brackets, like [1], right "
                    "after what it supports.")
        elif name == "web_fetch":
            note = f"The page {arguments.get('url', '')} reads:\n{output}\nAnswer using this page."
        else:
            note = f"The {name} tool ({arguments_json}) returned: {output}\nAnswer using this result."
        self.messages.insert(len(self.messages) - 1 if self.messages else 0, {"role": "system", "content": note})
