"""Remote MCP tools (``{"type": "mcp", "server_label", "server_url", ...}``) through the official ``mcp`` SDK.

How this works, per response: :class:`McpToolbox` connects to each listed server over streamable HTTP (the SDK's
``Client``; the request's ``headers`` on every call), lists its tools and announces them as an ``mcp_list_tools``
item (``response.mcp_list_tools.in_progress`` / ``.completed``, or ``.failed`` and the response fails with
``tool_error``). The tools (filtered by ``allowed_tools``) are offered to the model as functions. A call the model
makes is an ``mcp_call`` item (``response.mcp_call.in_progress``, ``response.mcp_call_arguments.delta/done``,
``response.mcp_call.completed`` / ``.failed``) whose output goes back to the model; when ``require_approval`` asks
for it, the call is instead an ``mcp_approval_request`` item and the response ends there. The next request answers
with ``{"type": "mcp_approval_response", "approval_request_id", "approve"}`` (with ``previous_response_id``, or with
the request item echoed in its input): an approved call runs first (its ``mcp_call`` carries
``approval_request_id``), a denied one is told to the model.

Network policy: a server URL must be http(s) and resolve only to public addresses, or to ones allowed in
``tools.fetch_allow`` (the list ``web_fetch`` uses; tests allow loopback there). The check runs on the resolved
addresses before connecting, and the SDK's HTTP client connects to the checked address only
(:mod:`~respstream.server.tools.mcp_transport`: pinned, so DNS rebinding between check and connect is closed). Every
HTTP response is read under ``limits.mcp_max_response_bytes``, and a result of more than ``limits.mcp_max_result_parts``
content parts (or tools) fails naming the limit, counted before the SDK parses it.
Sessions are closed when the response ends, whatever way it ends.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from respstream.server import request_limits
from respstream.server.http_errors import HTTPError
from respstream.server.tools.mcp_session import McpSession, McpSessionLost
from respstream.server.tools.netguard import AddressPolicy, FetchRefused

if TYPE_CHECKING:
    from respstream.server.events.writer import ResponseWriter

__all__ = ["McpApproval", "McpServerSpec", "McpToolError", "McpToolbox", "parse_mcp_tool"]

log = logging.getLogger("respstream.server")
MAX_MCP_SERVERS = 8  # per request
MAX_OUTPUT_CHARS = 100_000  # of one tool result handed to the model and stored on the item


class McpToolError(Exception):
    """Listing a server's tools failed (unreachable, refused by the network policy, not an MCP server), or a
    server's session died during a call (its item is ``failed``; nothing more can be asked of it)."""


@dataclass(slots=True)
class McpServerSpec:
    label: str
    url: str
    allowed_tools: set[str] | None = None
    always_approve: set[str] | None = None  # tools that never need approval (None: see `approval`)
    approval: str = "always"  # "always" | "never": the rule for tools not in always_approve/needs_approval
    needs_approval: set[str] = field(default_factory=set)
    headers: dict[str, str] = field(default_factory=dict)

    def requires_approval(self, tool: str) -> bool:
        if tool in self.needs_approval:
            return True
        if self.always_approve is not None and tool in self.always_approve:
            return False
        return self.approval == "always"


@dataclass(slots=True)
class McpApproval:
    """An ``mcp_approval_request`` item (from the previous response or the input) and the answer to it."""

    request_id: str
    server_label: str
    name: str
    arguments: str
    approve: bool
    reason: str | None = None


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def _names(raw: Any, param: str) -> set[str] | None:
    """``["a", "b"]`` or ``{"tool_names": [...]}`` (OpenAI's filter) -> a set; None when absent."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        unknown = set(raw) - {"tool_names", "read_only"}
        if unknown:
            raise _bad(f"{param}.{sorted(unknown)[0]} is not supported (tool_names only)", param,
                       "unsupported_parameter")
        if raw.get("read_only"):
            raise _bad(f"{param}.read_only is not supported", f"{param}.read_only", "unsupported_parameter")
        raw = raw.get("tool_names", [])
    if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
        raise _bad(f"{param} must be a list of tool names (or {{\"tool_names\": [...]}})", param, "invalid_type")
    return set(raw)


def parse_mcp_tool(tool: dict[str, Any], where: str) -> McpServerSpec:
    """Validate one ``{"type": "mcp", ...}`` tool. Raises a 400 :class:`HTTPError` naming the field."""
    for key in ("connector_id", "authorization", "server_description"):
        if tool.get(key) is not None and key != "server_description":
            raise _bad(f"{where}.{key} is not supported (remote servers by server_url only)", f"{where}.{key}",
                       "unsupported_parameter")
    label = tool.get("server_label")
    if not isinstance(label, str) or not label.strip():
        raise _bad(f"{where}.server_label is required", f"{where}.server_label", "missing_required_parameter")
    url = tool.get("server_url")
    if not isinstance(url, str) or not url:
        raise _bad(f"{where}.server_url is required", f"{where}.server_url", "missing_required_parameter")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(f"{where}.server_url must be an http(s) URL", f"{where}.server_url")
    headers = tool.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise _bad(f"{where}.headers must be an object of strings", f"{where}.headers", "invalid_type")
    if any("\n" in k + v or "\r" in k + v for k, v in headers.items()):
        raise _bad(f"{where}.headers must not contain line breaks", f"{where}.headers")
    spec = McpServerSpec(label=label, url=url, allowed_tools=_names(tool.get("allowed_tools"),
                                                                    f"{where}.allowed_tools"), headers=dict(headers))
    approval = tool.get("require_approval", "always")
    if approval in ("always", "never"):
        spec.approval = approval
    elif isinstance(approval, dict):
        unknown = set(approval) - {"always", "never"}
        if unknown:
            raise _bad(f"{where}.require_approval.{sorted(unknown)[0]} is not known (always, never)",
                       f"{where}.require_approval")
        spec.needs_approval = _names(approval.get("always"), f"{where}.require_approval.always") or set()
        spec.always_approve = _names(approval.get("never"), f"{where}.require_approval.never")
        spec.approval = "always"
    else:
        raise _bad(f"{where}.require_approval must be 'always', 'never' or {{always|never: {{tool_names}}}}",
                   f"{where}.require_approval")
    return spec


@dataclass(slots=True)
class _Server:
    spec: McpServerSpec
    session: McpSession | None = None
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {description, input_schema}


class McpToolbox:
    """The MCP servers of one response: connect, list, call, close (see the module docstring)."""

    def __init__(self, specs: list[McpServerSpec], approvals: list[McpApproval], policy: AddressPolicy,
                 *, timeout: float = 30.0) -> None:
        self.servers = [_Server(spec) for spec in specs]
        self.approvals = approvals
        self.policy = policy
        self.timeout = timeout
        self.by_tool: dict[str, _Server] = {}

    async def _connect(self, server: _Server) -> McpSession:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from respstream.server.tools.mcp_transport import PinnedTransport, mcp_http_client

        parts = urlsplit(server.spec.url)
        host = parts.hostname or ""
        limits = request_limits.current()
        pinned = PinnedTransport(self.policy, limits.mcp_max_response_bytes, limits.mcp_max_result_parts)
        try:
            await pinned.pin(host, parts.port or (443 if parts.scheme == "https" else 80))
        except FetchRefused:
            raise McpToolError(f"refusing to connect to MCP server {server.spec.label!r} at {host}: a private, "
                               "loopback, link-local or reserved address (allow it in tools.fetch_allow)") from None
        except OSError as exc:
            raise McpToolError(f"cannot resolve {host}: {exc}") from None

        async def opener(stack: contextlib.AsyncExitStack) -> Any:
            http = mcp_http_client(server.spec.headers or None, pinned)
            transport = streamable_http_client(server.spec.url, http_client=http)
            await stack.enter_async_context(http)
            return await stack.enter_async_context(Client(transport, read_timeout_seconds=self.timeout))

        session = server.session = McpSession(opener, server.spec.label)
        await session.start()
        return session

    async def start(self, writer: ResponseWriter) -> None:
        """List every server's tools as ``mcp_list_tools`` items. Raises :class:`McpToolError` for the first
        server that fails (its item is done with ``error``)."""
        for server in self.servers:
            item: dict[str, Any] = {"id": writer.dialect.new_id("mcpl"), "type": "mcp_list_tools",
                                    "server_label": server.spec.label, "tools": [], "error": None}
            index = writer.add_output_item(item)
            where = {"item_id": item["id"], "output_index": index}
            writer.emit_event("response.mcp_list_tools.in_progress", where)
            await writer.flush()
            error: str | None = None
            try:
                session = await self._connect(server)
                listed = await session.run(lambda client: client.list_tools())
            except McpToolError as exc:
                error = str(exc)
            except Exception as exc:  # the SDK raises many kinds; the response fails with the reason
                error = f"MCP server {server.spec.label!r} could not list its tools: {type(exc).__name__}: {exc}"
            if error is not None:
                writer.emit_event("response.mcp_list_tools.failed", where)
                writer.finish_output_item(index, {**item, "error": error})
                await writer.flush()
                raise McpToolError(error)
            tools = []
            for tool in listed.tools:
                allowed = server.spec.allowed_tools
                if allowed is not None and tool.name not in allowed:
                    continue
                schema = getattr(tool, "input_schema", None) or {"type": "object", "properties": {}}
                server.tools[tool.name] = {"description": tool.description or "", "input_schema": schema}
                self.by_tool.setdefault(tool.name, server)
                tools.append({"name": tool.name, "description": tool.description, "input_schema": schema,
                              "annotations": None})
            writer.emit_event("response.mcp_list_tools.completed", where)
            writer.finish_output_item(index, {**item, "tools": tools})
            await writer.flush()

    def specs(self) -> list[dict[str, Any]]:
        """The tools as Chat Completions functions."""
        return [{"type": "function", "function": {"name": name, "description": info["description"],
                                                  "parameters": info["input_schema"]}}
                for name, server in self.by_tool.items() for info in [server.tools[name]]]

    def needs_approval(self, name: str) -> bool:
        return self.by_tool[name].spec.requires_approval(name)

    def request_approval(self, writer: ResponseWriter, name: str, arguments: str) -> None:
        item = {"id": writer.dialect.new_id("mcpr"), "type": "mcp_approval_request",
                "server_label": self.by_tool[name].spec.label, "name": name, "arguments": arguments}
        index = writer.add_output_item(item)
        writer.finish_output_item(index, item)

    async def call(self, writer: ResponseWriter, name: str, arguments: str, *,
                   approval_request_id: str | None = None, server: _Server | None = None) -> str:
        """Run one call as an ``mcp_call`` item; returns what the model is told (the output or the error)."""
        server = server or self.by_tool[name]
        item: dict[str, Any] = {"id": writer.dialect.new_id("mcp"), "type": "mcp_call", "status": "in_progress",
                                "server_label": server.spec.label, "name": name, "arguments": arguments,
                                "output": None, "error": None}
        if approval_request_id is not None:
            item["approval_request_id"] = approval_request_id
        index = writer.add_output_item(item)
        where = {"item_id": item["id"], "output_index": index}
        writer.emit_event("response.mcp_call.in_progress", where)
        if arguments:
            writer.emit_event("response.mcp_call_arguments.delta", {**where, "delta": arguments})
        writer.emit_event("response.mcp_call_arguments.done", {**where, "arguments": arguments})
        await writer.flush()
        lost: str | None = None
        try:
            output, error = await self._invoke(server, name, arguments)
        except McpSessionLost as exc:
            lost = f"the session with MCP server {server.spec.label!r} ended during the call: {exc}"
            output, error = "", lost
        if error is None:
            writer.emit_event("response.mcp_call.completed", where)
            writer.finish_output_item(index, {**item, "status": "completed", "output": output})
        else:
            writer.emit_event("response.mcp_call.failed", where)
            writer.finish_output_item(index, {**item, "status": "failed", "error": error})
        await writer.flush()
        if lost is not None:  # a dead session answers nothing more: the response ends failed, saying why
            raise McpToolError(lost)
        return output if error is None else f"error: {error}"

    async def _invoke(self, server: _Server, name: str, arguments: str) -> tuple[str, str | None]:
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return "", f"the arguments are not JSON: {exc}"
        except RecursionError:
            return "", "the arguments nest deeper than the gateway reads"
        if not isinstance(args, dict):
            return "", "the arguments must be a JSON object"
        assert server.session is not None
        try:
            result = await server.session.run(lambda client: client.call_tool(name, args))
        except McpSessionLost:
            raise
        except Exception as exc:  # the call failed, the session lives: the model is told, the response goes on
            return "", f"{type(exc).__name__}: {exc}"
        texts = [str(getattr(part, "text", "")) for part in getattr(result, "content", []) or []
                 if getattr(part, "type", "") == "text"]
        text = "\n".join(texts)
        if not text and getattr(result, "structured_content", None) is not None:
            text = json.dumps(result.structured_content)
        text = text[:MAX_OUTPUT_CHARS]
        if getattr(result, "is_error", False):
            return "", text or "the tool reported an error"
        return text, None

    async def run_approvals(self, writer: ResponseWriter, messages: list[dict[str, Any]]) -> None:
        """Answer the approvals this request carries: run the approved calls, tell the model about the rest."""
        for approval in self.approvals:
            server = next((s for s in self.servers if s.spec.label == approval.server_label), None)
            call_id = f"call_{approval.request_id}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": approval.name, "arguments": approval.arguments or "{}"}}]})
            if not approval.approve:
                reason = f" ({approval.reason})" if approval.reason else ""
                result = f"The user did not approve this call{reason}."
            elif server is None or approval.name not in server.tools:
                result = f"error: MCP server {approval.server_label!r} with tool {approval.name!r} is not in tools"
            else:
                result = await self.call(writer, approval.name, approval.arguments,
                                         approval_request_id=approval.request_id, server=server)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})

    async def aclose(self) -> None:
        for server in self.servers:
            if server.session is not None:
                await server.session.aclose()
