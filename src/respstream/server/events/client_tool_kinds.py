"""Client-executed tool types beyond ``function``: ``namespace``, ``custom``, ``shell``, ``local_shell``,
``apply_patch`` (and ``tool_search`` / ``defer_loading``), bridged to upstreams that only call functions.

How this works: :func:`flatten_tool` turns one request tool into flat Chat Completions function tools, each with a
:class:`ClientTool` that remembers what it really is. The upstream only ever sees functions:

- ``namespace`` -> each inner function/custom tool as ``<namespace>__<name>`` (a clash with another tool is a 400);
  a call comes back as a ``function_call`` / ``custom_tool_call`` with ``namespace`` and the inner ``name`` restored.
- ``custom`` (freeform text, optional ``format`` grammar) -> a function with one string argument ``input`` (the
  grammar goes into its description: the gateway cannot constrain generation by a Lark/regex grammar); a call
  comes back as a ``custom_tool_call`` with ``input``.
- ``shell`` / ``local_shell`` / ``apply_patch`` -> functions named after the type whose parameters are the action
  (``commands`` / ``command`` / the patch ``operation``); calls come back as ``shell_call`` / ``local_shell_call`` /
  ``apply_patch_call`` items for the client to run.

The way back is stateless (:func:`call_as_input`, :func:`output_as_input`): those items and their ``*_output``
answers, sent as input or replayed from a stored response, become the flat ``function_call`` /
``function_call_output`` history the upstream saw, so nothing depends on the tools of the next request.

``defer_loading: true`` tools are offered like any other (the gateway has no tool search, so a deferred tool is
simply visible from the start); a ``tool_search`` tool is accepted and needs nothing to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from respstream.server.events.dialects import EXTENSION_PREFIX
from respstream.server.http_errors import HTTPError

__all__ = ["CLIENT_KINDS", "ClientTool", "ClientToolSet", "base_kind", "call_as_input", "call_item", "flat_name",
           "flatten_tool", "output_as_input", "tool_call_items"]

# tool `type`s handled here; `tool_search` needs nothing (deferred tools are offered from the start)
CLIENT_KINDS = frozenset({"namespace", "custom", "shell", "local_shell", "apply_patch", "tool_search"})
NAMESPACE_SEPARATOR = "__"

_STRING = {"type": "string"}
_SHELL_PARAMETERS = {
    "type": "object",
    "properties": {"commands": {"type": "array", "items": _STRING, "description": "Shell commands to run, in order."},
                   "timeout_ms": {"type": "integer"}},
    "required": ["commands"],
}
_LOCAL_SHELL_PARAMETERS = {
    "type": "object",
    "properties": {"command": {"type": "array", "items": _STRING, "description": "The command and its arguments."},
                   "working_directory": _STRING, "timeout_ms": {"type": "integer"}},
    "required": ["command"],
}
_APPLY_PATCH_PARAMETERS = {
    "type": "object",
    "properties": {"type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
                   "path": _STRING, "diff": {"type": "string", "description": "The unified diff (empty to delete)."}},
    "required": ["type", "path", "diff"],
}
_BUILTIN = {
    "shell": ("Run shell commands on the user's machine.", _SHELL_PARAMETERS),
    "local_shell": ("Run a command on the user's machine.", _LOCAL_SHELL_PARAMETERS),
    "apply_patch": ("Create, update or delete a file with a unified diff.", _APPLY_PATCH_PARAMETERS),
}


@dataclass(frozen=True, slots=True)
class ClientTool:
    """One flat function offered upstream, and what the client defined."""

    kind: str  # function | custom | shell | local_shell | apply_patch
    flat: str  # the function name the upstream sees
    name: str  # the tool's own name (the type for shell/local_shell/apply_patch)
    namespace: str | None = None


def base_kind(kind: str | None) -> str | None:
    """``kind`` without the Open Responses ``respstream:`` prefix the gateway puts on the kinds the spec lacks."""
    return kind[len(EXTENSION_PREFIX):] if kind is not None and kind.startswith(EXTENSION_PREFIX) else kind


def flat_name(namespace: str | None, name: str) -> str:
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def _name(tool: dict[str, Any], where: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise _bad(f"{where}.name is required", f"{where}.name", "missing_required_parameter")
    return name


def _function(flat: str, description: Any, parameters: Any, where: str) -> dict[str, Any]:
    if parameters is not None and not isinstance(parameters, dict):
        raise _bad(f"{where}.parameters must be an object (JSON Schema)", f"{where}.parameters", "invalid_type")
    return {"type": "function", "name": flat, "description": description if isinstance(description, str) else "",
            "parameters": parameters or {"type": "object", "properties": {}}}


def _custom_function(tool: dict[str, Any], flat: str, where: str) -> dict[str, Any]:
    raw = tool.get("description")
    description = raw if isinstance(raw, str) else ""
    fmt = tool.get("format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "grammar"):
            raise _bad(f"{where}.format.type must be text or grammar", f"{where}.format.type")
        if fmt["type"] == "grammar":
            definition, syntax = fmt.get("definition"), fmt.get("syntax")
            if not isinstance(definition, str) or syntax not in ("lark", "regex"):
                raise _bad(f"{where}.format needs definition (a string) and syntax lark or regex", f"{where}.format")
            description += f"\nThe input must match this {syntax} grammar:\n{definition}"
    parameters = {"type": "object", "properties": {"input": {"type": "string", "description": "The raw input."}},
                  "required": ["input"]}
    return {"type": "function", "name": flat, "description": description.strip(), "parameters": parameters}


def flatten_tool(tool: dict[str, Any], where: str) -> list[tuple[ClientTool, dict[str, Any]]]:
    """``(ClientTool, flat Responses function tool)`` pairs for one request tool of a kind in :data:`CLIENT_KINDS`
    (or ``function``). Raises a 400 naming the bad field."""
    kind = base_kind(tool.get("type"))
    if kind == "function":
        name = _name(tool, where)
        return [(ClientTool("function", name, name), tool)]
    if kind == "custom":
        name = _name(tool, where)
        return [(ClientTool("custom", name, name), _custom_function(tool, name, where))]
    if kind in _BUILTIN:
        description, parameters = _BUILTIN[kind]
        return [(ClientTool(kind, kind, kind), _function(kind, description, parameters, where))]
    if kind == "tool_search":
        return []
    namespace = _name(tool, where)
    inner = tool.get("tools")
    if not isinstance(inner, list) or not inner:
        raise _bad(f"{where}.tools must be a non-empty list of function or custom tools", f"{where}.tools")
    summary = tool.get("description") if isinstance(tool.get("description"), str) else ""
    flat: list[tuple[ClientTool, dict[str, Any]]] = []
    for j, member in enumerate(inner):
        here = f"{where}.tools[{j}]"
        if not isinstance(member, dict) or member.get("type") not in ("function", "custom"):
            raise _bad(f"{here}.type must be function or custom", f"{here}.type")
        name = _name(member, here)
        full = flat_name(namespace, name)
        if member["type"] == "custom":
            spec = _custom_function(member, full, here)
        else:
            spec = _function(full, member.get("description"), member.get("parameters"), here)
        if summary:
            spec["description"] = f"[{namespace}: {summary}] {spec['description']}".strip()
        flat.append((ClientTool(member["type"], full, name, namespace), spec))
    return flat


@dataclass(slots=True)
class ClientToolSet:
    """A request's client-run tools: flat functions for the upstream, what each really is, and the echo."""

    flat: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[str, ClientTool] = field(default_factory=dict)
    declared: list[dict[str, Any]] = field(default_factory=list)

    def add(self, tool: dict[str, Any], where: str, server_tool_names: set[str]) -> None:
        """Add ``tools[i]`` (a function or one of :data:`CLIENT_KINDS`). Raises a 400 naming a clash."""
        for client_tool, spec in flatten_tool(tool, where):
            name = client_tool.flat
            if name in server_tool_names:
                raise _bad(f"{where}.name {name!r} clashes with the server tool of the same name", f"{where}.name")
            if name in self.kinds:
                raise _bad(f"{where}: the tool name {name!r} is defined twice", f"{where}.name")
            params = spec.get("parameters", {"type": "object", "properties": {}})
            if params is not None and not isinstance(params, dict):
                raise _bad(f"{where}.parameters must be an object (JSON Schema)", f"{where}.parameters",
                           "invalid_type")
            self.kinds[name] = client_tool
            self.flat.append(spec)
        self.declared.append(tool)


def _json_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else ([value] if isinstance(value, str) else [])


def call_item(tool: ClientTool, *, item_id: str, call_id: str, arguments: str) -> dict[str, Any]:
    """The finished output item for the upstream's call of ``tool`` (function calls keep the ``arguments``)."""
    item: dict[str, Any]
    if tool.kind == "function":
        item = {"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id,
                "name": tool.name, "arguments": arguments}
    elif tool.kind == "custom":
        args = _json_object(arguments)
        text = args.get("input") if isinstance(args.get("input"), str) else arguments  # a model ignoring the schema
        item = {"id": item_id, "type": "custom_tool_call", "status": "completed", "call_id": call_id,
                "name": tool.name, "input": text}
    elif tool.kind == "shell":
        args = _json_object(arguments)
        action: dict[str, Any] = {"commands": _strings(args.get("commands")),
                                  "timeout_ms": _int(args.get("timeout_ms")), "max_output_length": None}
        return {"id": item_id, "type": "shell_call", "status": "completed", "call_id": call_id, "action": action}
    elif tool.kind == "local_shell":
        args = _json_object(arguments)
        action = {"type": "exec", "command": _strings(args.get("command")), "env": {},
                  "timeout_ms": _int(args.get("timeout_ms")), "user": None,
                  "working_directory": args.get("working_directory") if isinstance(
                      args.get("working_directory"), str) else None}
        return {"id": item_id, "type": "local_shell_call", "status": "completed", "call_id": call_id,
                "action": action}
    else:  # apply_patch
        args = _json_object(arguments)
        operation: dict[str, Any] = {"type": args.get("type") if args.get("type") in (
            "create_file", "update_file", "delete_file") else "update_file", "path": str(args.get("path", ""))}
        if operation["type"] != "delete_file":
            operation["diff"] = str(args.get("diff", ""))
        return {"id": item_id, "type": "apply_patch_call", "status": "completed", "call_id": call_id,
                "operation": operation}
    if tool.namespace is not None:
        item["namespace"] = tool.namespace
    return item


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def tool_call_items(item: dict[str, Any], emit: Callable[[str, dict[str, Any]], None], index: int) -> None:
    """The events between ``output_item.added`` and ``.done`` of a finished call item: argument or input deltas."""
    where = {"item_id": item["id"], "output_index": index}
    kind = item["type"].rsplit(":", 1)[-1]  # (`respstream:custom_tool_call` in Open Responses)
    if kind == "function_call":
        if item["arguments"]:
            emit("response.function_call_arguments.delta", {**where, "delta": item["arguments"]})
        emit("response.function_call_arguments.done", {**where, "arguments": item["arguments"], "name": item["name"]})
    elif kind == "custom_tool_call":
        if item["input"]:
            emit("response.custom_tool_call_input.delta", {**where, "delta": item["input"]})
        emit("response.custom_tool_call_input.done", {**where, "input": item["input"]})


# -- the way back: call items and their outputs as flat function history -----------------------------------------

_CALL_ARGUMENTS: dict[str, Callable[[dict[str, Any]], tuple[str, Any]]] = {
    "custom_tool_call": lambda i: (flat_name(i.get("namespace"), str(i.get("name", ""))), {"input": i.get("input")}),
    "shell_call": lambda i: ("shell", i.get("action")),
    "local_shell_call": lambda i: ("local_shell", i.get("action")),
    "apply_patch_call": lambda i: ("apply_patch", i.get("operation")),
}
OUTPUT_KINDS = frozenset({"custom_tool_call_output", "shell_call_output", "local_shell_call_output",
                          "apply_patch_call_output"})
CALL_KINDS = frozenset(_CALL_ARGUMENTS)


def call_as_input(item: dict[str, Any], where: str) -> tuple[str, str, str]:
    """``(call_id, flat name, arguments)`` of a client call item (``function_call`` with ``namespace``, or one of
    :data:`CALL_KINDS`) as the upstream saw it."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _bad(f"{where}.call_id must be a string", f"{where}.call_id", "invalid_type")
    kind = base_kind(str(item.get("type")))
    if kind == "function_call":
        return call_id, flat_name(item.get("namespace"), str(item.get("name", ""))), str(item.get("arguments", ""))
    name, arguments = _CALL_ARGUMENTS[str(kind)](item)
    return call_id, name, json.dumps(arguments, ensure_ascii=False)


def output_as_input(item: dict[str, Any], where: str, text_of: Callable[[Any, str], str]) -> tuple[str, str]:
    """``(call_id, output text)`` of one of :data:`OUTPUT_KINDS`. ``text_of`` renders a content-part list."""
    kind = base_kind(item.get("type"))
    call_id = item.get("call_id") if kind != "local_shell_call_output" else item.get("call_id", item.get("id"))
    if not isinstance(call_id, str) or not call_id:
        raise _bad(f"{where}.call_id must be a string", f"{where}.call_id", "invalid_type")
    output = item.get("output")
    if kind == "shell_call_output":
        return call_id, json.dumps(output if isinstance(output, list) else [], ensure_ascii=False)
    if kind == "apply_patch_call_output":
        status = item.get("status") if isinstance(item.get("status"), str) else "completed"
        return call_id, f"{status}: {output}" if isinstance(output, str) and output else str(status)
    if isinstance(output, list):
        return call_id, text_of(output, f"{where}.output")
    if not isinstance(output, str):
        raise _bad(f"{where}.output must be a string", f"{where}.output", "invalid_type")
    return call_id, output
