"""What a new response is given from the store: its previous response, its conversation's items, the answers to
its MCP approval requests. Each is checked against the caller's key: another key's response or conversation is
"not found", never someone else's data."""

from __future__ import annotations

from typing import Any

from respstream.server.config import Config
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.conversation_records import conversation_of
from respstream.server.inputs.history import items_from_json
from respstream.server.inputs.history_refs import conversation_reference
from respstream.server.inputs.response_chain import chain_items, find_record, unstored_turns
from respstream.server.inputs.response_request import InputItem, ResponseRequest
from respstream.server.store.base import ResponseRecord, Store
from respstream.server.tools.mcp_tools import McpApproval, McpToolbox
from respstream.server.tools.netguard import AddressPolicy

__all__ = ["check_call_outputs", "context_and_base", "mcp_toolbox", "previous_record", "request_context"]


async def previous_record(store: Store, rid: str, owner: str | None, local: Store | None) -> ResponseRecord:
    """The record ``previous_response_id`` names (see :func:`~respstream.server.inputs.response_chain.find_record`);
    a 400 when the caller cannot see it."""
    prev = await find_record(store, rid, owner, local)
    if prev is None:
        raise HTTPError(400, "previous_response_not_found", f"Previous response with id '{rid}' not found.",
                        param="previous_response_id")
    return prev


async def request_context(store: Store, config: Config, req: ResponseRequest, owner: str | None,
                          local: Store | None = None) -> list[InputItem]:
    """The items the model sees (see :func:`context_and_base`)."""
    return (await context_and_base(store, config, req, owner, local))[0]


async def context_and_base(store: Store, config: Config, req: ResponseRequest, owner: str | None,
                           local: Store | None = None) -> tuple[list[InputItem], list[dict[str, Any]], str | None]:
    """The items the model sees — the conversation's last ``conversation_window`` items, the history of the
    ``previous_response_id`` chain (:func:`~respstream.server.inputs.response_chain.chain_items`), then the request's
    input, the last ``conversation_window`` + input of them — what the new record keeps as its ``base`` (a reference
    to the conversation window it saw, inputs/history_refs.py: never a copy of it) and the parent it refers to. A
    ``store: false`` parent is deleted once its client has it (or lives on one socket), so a stored child keeps that
    parent's own turns in its base and refers to the nearest stored ancestor for the rest
    (:func:`~respstream.server.inputs.response_chain.unstored_turns`)."""
    base: list[dict[str, Any]] = []
    items: list[InputItem] = []
    if req.conversation_id:
        await conversation_of(store, req.conversation_id, owner, implicit=not req.conversation_api)
        window = await store.conversation(req.conversation_id, newest=config.conversation_window)
        items = items_from_json(window)
        base = conversation_reference(req.conversation_id, window)
    parent = req.previous_response_id
    if parent:
        prev = await previous_record(store, parent, owner, local)
        history = await chain_items(store, prev, owner, local, window=config.conversation_window)
        items.extend(history)
        if prev.request.get("store") is False and req.store is not False:
            carried, parent = await unstored_turns(store, prev, owner, local, window=config.conversation_window)
            base = base + carried
    check_call_outputs(items, req.input)
    items.extend(req.input)
    window_size = config.conversation_window + len(req.input)
    return items[-window_size:], base, parent


async def mcp_toolbox(store: Store, config: Config, req: ResponseRequest, owner: str | None,
                      local: Store | None) -> McpToolbox | None:
    """The request's MCP servers, with its approval answers matched to their requests (from the input or the
    previous response). Raises a 400 for an answer to an approval request that cannot be found."""
    if not req.mcp_servers and not req.mcp_approvals:
        return None
    asked = {i.get("id"): i for i in req.mcp_approval_requests}
    if req.mcp_approvals and req.previous_response_id:
        prev = await previous_record(store, req.previous_response_id, owner, local)
        asked.update({i.get("id"): i for i in prev.response.get("output", [])
                      if i.get("type") == "mcp_approval_request"})
    approvals = []
    for answer in req.mcp_approvals:
        found = asked.get(answer["approval_request_id"])
        if found is None:
            raise HTTPError(400, "invalid_value", "No mcp_approval_request with id "
                            f"'{answer['approval_request_id'][:80]}' in the input or the previous response.",
                            param="input")
        approvals.append(McpApproval(request_id=answer["approval_request_id"],
                                     server_label=str(found.get("server_label", "")),
                                     name=str(found.get("name", "")), arguments=str(found.get("arguments", "")),
                                     approve=answer["approve"], reason=answer.get("reason")))
    policy = AddressPolicy(config.tools.get("fetch_allow", []) or [])
    return McpToolbox(req.mcp_servers, approvals, policy, timeout=float(config.tools.get("timeout", 30.0) or 30.0))


def check_call_outputs(context: list[InputItem], new: list[InputItem]) -> None:
    """Every ``function_call_output`` must answer a ``function_call`` before it (in the context or the new input):
    an output for a call that never happened is a client bug, answered with a 400 naming the item."""
    calls = {i.call_id for i in context if i.type == "function_call"}
    for index, item in enumerate(new):
        if item.type == "function_call":
            calls.add(item.call_id)
        elif item.type == "function_call_output" and item.call_id not in calls:
            raise HTTPError(400, "invalid_value",
                            f"No tool call found for function call output with call_id '{item.call_id}'.",
                            param=f"input[{index}].call_id")
