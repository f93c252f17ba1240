"""Tool call items of a response: client function calls, server tool calls (announced, run, finished) and items
built elsewhere (remote MCP calls), with the same output-index bookkeeping as the writer's own message items.

How this works: a mixin of :class:`~respstream.server.events.writer.ResponseWriter`; every method closes the open
message item first (so items never interleave) and emits through the writer's ``_emit``, so the protocol rule checker
and the sequence numbers see these events like any other. Which item type a server tool becomes depends on the dialect:
an extension item (``respstream:<name>_call``) in Open Responses, the hosted ``web_search_call`` / ``mcp_call`` items
where the platform has them, else (the seed platform) a ``function_call`` with its output, marked
``server_tool: true`` so a client can tell it from a call it must run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from respstream.server.events.client_tool_kinds import ClientTool, call_item, tool_call_items
from respstream.server.events.dialects import EXTENSION_PREFIX, Dialect

__all__ = ["ToolCallItems"]


# id prefixes of the client call items (openai dialects; the platform dialect uses UUIDs)
_ID_PREFIX = {"function": "fc", "custom": "ctc", "shell": "sh", "local_shell": "lsh", "apply_patch": "apc"}


class ToolCallItems:
    """The tool-call half of the writer (a mixin: it shares the writer's state)."""

    dialect: Dialect
    _output: list[dict[str, Any]]
    _tool_summary: list[dict[str, Any]]

    if TYPE_CHECKING:
        def _emit(self, event_type: str, fields: dict[str, Any], *, terminal: bool = False,
                  own: bool = True) -> None: ...
        def _close_current_item(self, *, status: str = "completed") -> None: ...

    def client_tool_call(self, *, call_id: str, name: str, arguments: str, tool: ClientTool | None = None) -> None:
        """A call of a client tool: the whole item, for the caller to run. ``tool``: what the flat function ``name``
        really is (a namespaced function, a custom tool, shell...; server/events/client_tool_kinds.py)."""
        self._close_current_item()
        if tool is None or (tool.kind == "function" and tool.namespace is None):
            item, index = self._function_call(call_id, name, arguments)
            self._done_item(index, {**item, "arguments": arguments, "status": "completed"})
        else:
            done = call_item(tool, item_id=self.dialect.new_id(_ID_PREFIX[tool.kind]), call_id=call_id,
                             arguments=arguments)
            empty = {"function_call": {"arguments": ""}, "custom_tool_call": {"input": ""}}.get(done["type"], {})
            emit: Callable[[str, dict[str, Any]], None] = self._emit
            if self.dialect.extension_tool_items and done["type"] != "function_call":
                # Open Responses: an item or event outside the spec carries the implementor prefix
                done["type"] = EXTENSION_PREFIX + done["type"]
                emit = self._emit_extension
            index = self._add_item({**done, **empty, "status": "in_progress"})
            tool_call_items(done, emit, index)
            self._done_item(index, done)
            name = tool.name
        self._tool_summary.append(
            {"call_id": call_id, "name": name, "arguments": arguments, "status": "completed", "output": None}
        )

    def server_tool_started(self, *, call_id: str, name: str, arguments: str, query: str | None = None) -> int:
        """Announce a server-side tool call; returns its output index for :meth:`server_tool_finished`."""
        self._close_current_item()
        if self.dialect.extension_tool_items:
            # Open Responses: a hosted tool of ours is an extension item named after it (`respstream:web_search_call`).
            item: dict[str, Any] = {"id": self.dialect.new_id("rst"), "type": f"{EXTENSION_PREFIX}{name}_call",
                                    "status": "in_progress", "call_id": call_id, "name": name,
                                    "arguments": arguments, "output": None}
            if query is not None:
                item["query"] = query
            return self._add_item(item)
        hosted = self.dialect.hosted_tool_items
        if hosted and name == "web_search":
            item = {"id": self.dialect.new_id("ws"), "type": "web_search_call", "status": "in_progress",
                    "action": {"type": "search", "query": query or ""}}
            index = self._add_item(item)
            self._emit("response.web_search_call.in_progress", {"item_id": item["id"], "output_index": index})
            self._emit("response.web_search_call.searching", {"item_id": item["id"], "output_index": index})
            return index
        if hosted:
            item = {"id": self.dialect.new_id("mcp"), "type": "mcp_call", "status": "in_progress", "name": name,
                    "server_label": "respstream", "arguments": "", "output": None, "error": None}
            index = self._add_item(item)
            where = {"item_id": item["id"], "output_index": index}
            self._emit("response.mcp_call.in_progress", where)
            if arguments:
                self._emit("response.mcp_call_arguments.delta", {**where, "delta": arguments})
            self._emit("response.mcp_call_arguments.done", {**where, "arguments": arguments})
            self._output[index] = {**item, "arguments": arguments}
            return index
        # The seed platform: a server tool is a `function_call` item whose `output_item.done` carries `output` and
        # `status`. `server_tool: true` (from `output_item.added` on) tells a client that runs every function call
        # that this one already runs on the server: it must not run it, nor send a function_call_output for it.
        item, index = self._function_call(call_id, name, arguments, server_tool=True)
        self._output[index] = {**item, "arguments": arguments}
        return index

    def _emit_extension(self, event_type: str, fields: dict[str, Any]) -> None:
        self._emit(EXTENSION_PREFIX + event_type, fields)

    def _function_call(self, call_id: str, name: str, arguments: str, *, server_tool: bool = False
                       ) -> tuple[dict[str, Any], int]:
        """A ``function_call`` item added with its whole arguments (one delta, then done); (the item, its index)."""
        item: dict[str, Any] = {"id": self.dialect.new_id("fc"), "type": "function_call", "status": "in_progress",
                                "call_id": call_id, "name": name, "arguments": ""}
        if server_tool:
            item["server_tool"] = True
        index = self._add_item(item)
        where = {"item_id": item["id"], "output_index": index}
        if arguments:
            self._emit("response.function_call_arguments.delta", {**where, "delta": arguments})
        self._emit("response.function_call_arguments.done", {**where, "arguments": arguments, "name": name})
        return item, index

    def server_tool_finished(
        self, index: int, *, output: str, status: str, sources: list[str] | None = None
    ) -> None:
        """The tool ran: ``status`` is ``completed`` or ``failed``; ``output`` its result or failure text."""
        item = dict(self._output[index])
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "web_search_call":
            self._emit("response.web_search_call.completed", where)
            action = dict(item["action"])
            action["sources"] = [{"type": "url", "url": url} for url in sources or []]
            item.update(action=action, status=status, output=output)
        elif item["type"].startswith(EXTENSION_PREFIX):
            item.update(status=status, output=output)
            if sources is not None:
                item["sources"] = [{"type": "url", "url": url} for url in sources]
        elif item["type"] == "mcp_call":
            self._emit("response.mcp_call.completed" if status == "completed" else "response.mcp_call.failed", where)
            item.update(status=status, output=output if status == "completed" else None,
                        error=None if status == "completed" else output)
        else:
            item.update(status=status, output=output)
            self._tool_summary.append({"call_id": item["call_id"], "name": item["name"],
                                       "arguments": item["arguments"], "status": status, "output": output})
        self._done_item(index, item)

    # Public for item kinds built outside this module (server/tools/mcp_tools.py): the same bookkeeping as our own.
    def add_output_item(self, item: dict[str, Any]) -> int:
        """Close any open item, add ``item`` (``response.output_item.added``); returns its output index."""
        self._close_current_item()
        return self._add_item(item, own=False)

    def finish_output_item(self, index: int, item: dict[str, Any]) -> None:
        self._done_item(index, item, own=False)

    # (own=False: what other modules hand in is checked as decoded from the bytes sent; see ResponseWriter._emit)
    def emit_event(self, event_type: str, fields: dict[str, Any]) -> None:
        self._emit(event_type, fields, own=False)

    def _add_item(self, item: dict[str, Any], *, own: bool = True) -> int:
        index = len(self._output)
        self._output.append(item)
        self._emit("response.output_item.added", {"output_index": index, "item": item}, own=own)
        return index

    def _done_item(self, index: int, item: dict[str, Any], *, own: bool = True) -> None:
        self._output[index] = item
        self._emit("response.output_item.done", {"output_index": index, "item": item}, own=own)
