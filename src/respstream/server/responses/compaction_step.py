"""Compacting a response's context before it generates (``context_management``, ``compaction_trigger``).

How this works: :func:`plan_compaction` decides, in ``ResponseService.start``, what would be summarised: the
trigger compacts the whole context; ``context_management`` only when the context passes its threshold (the
upstream's tokenizer counts where it has one, else the bytes/4 estimate), and then everything before the current
turn (the request's own input when there is history, else the input from its last user message or tool call
group on). Instructions and system/developer messages stay as they are. After ``response.created`` the pipeline
runs :func:`compact_step`: the part is summarised as ``POST /v1/responses/compact`` does (:func:`summarise`), the
``compaction`` item is emitted first in ``output``, and the model then answers from [instructions, summary, current
turn]; with the trigger the response ends there. The record keeps that compacted context (``request["context"]``),
so a ``previous_response_id`` chain continues from it; a conversation gets the ``compaction`` item, where its
history restarts (:func:`~respstream.server.inputs.history.items_from_json`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.compaction_item import SUMMARY_PREFIX, encode_compaction, summary_item
from respstream.server.inputs.context_limit import ContextLimit, check_context, estimated_tokens
from respstream.server.inputs.context_management import DEFAULT_WINDOW_SHARE
from respstream.server.inputs.history import items_to_messages
from respstream.server.inputs.response_request import InputItem, ResponseRequest
from respstream.server.request_limits import current as current_limits
from respstream.server.store.memory import MemoryStore
from respstream.server.upstream.base import Usage

if TYPE_CHECKING:
    from respstream.server.events.dialects import Dialect
    from respstream.server.responses.pipeline import Pipeline
    from respstream.server.store.base import ResponseRecord, Store

__all__ = ["SUMMARY_INSTRUCTIONS", "CompactionPlan", "ResponseStarter", "Summary", "compact_step", "plan_compaction",
           "summarise",
           "transcript"]

SUMMARY_INSTRUCTIONS = (
    "You compact conversations. Summarise the conversation below so it can be continued later: keep every fact, "
    "decision, name, number and open question; drop pleasantries. Answer with the summary only."
)


class ResponseStarter(Protocol):
    """What summarising needs of the response service (responses_service.py): start a response, wait for it."""

    dialect: Dialect

    async def start(self, req: ResponseRequest, *, owner: str | None,
                    local: Store | None = None) -> tuple[ResponseRecord, Any]: ...

    async def wait(self, response_id: str) -> None: ...

    def cancel_running(self, response_id: str, code: str = "cancelled", message: str | None = None) -> bool: ...


@dataclass(slots=True)
class Summary:
    text: str
    model: str
    usage: dict[str, Any]


@dataclass(slots=True)
class CompactionPlan:
    kept: list[InputItem]  # instructions-like system/developer messages, kept verbatim before the summary
    compacted: list[InputItem]  # what the summary replaces
    tail: list[InputItem]  # the current turn, kept verbatim after it (a suffix of the request's input)
    trigger: bool  # compaction_trigger: the response is the compaction item only
    tokens: int  # the context's size when the decision was made
    limit: ContextLimit | None = None  # the routed model's context, checked again once compacted
    upstream: Any = None
    model_id: str = ""


def transcript(instructions: str | None, items: list[InputItem]) -> str:
    """The conversation as plain text, one line per item (what the summarising model reads)."""
    lines = [f"System: {instructions}"] if instructions else []
    for item in items:
        if item.type == "message":
            lines.append(f"{item.role.capitalize()}: {item.text}")
        elif item.type == "function_call":
            lines.append(f"Tool call {item.name}({item.arguments}) [{item.call_id}]")
        elif item.type == "function_call_output":
            lines.append(f"Tool result [{item.call_id}]: {item.output}")
    return "\n".join(lines)


async def summarise(svc: ResponseStarter, items: list[InputItem], *, instructions: str | None, model: str,
                    owner: str | None, temperature: float | None = None) -> Summary:
    """Summarise ``items`` with an ordinary response on ``model`` (no tools, kept nowhere), sampled at the
    ``temperature`` of the response that wants it (a client asking for 0 gets a summary at 0 too). Raises
    :class:`HTTPError`: the summarising request's own (400 context_length_exceeded...), or 502 when the model gave
    no answer."""
    summarise_req = ResponseRequest(
        input=[InputItem("message", role="user", text=transcript(instructions, items))],
        model=model, store=False, instructions=SUMMARY_INSTRUCTIONS, server_tools=set(), tool_choice="none",
        temperature=temperature,
    )
    scratch = MemoryStore(max_responses=1)  # the summarising response is not kept anywhere
    cap = current_limits().compaction_max_output_tokens
    record, _ = await svc.start(summarise_req, owner=owner, local=scratch)
    watch = asyncio.ensure_future(_stop_past_cap(svc, scratch, record.id, cap))
    try:
        await svc.wait(record.id)
    except asyncio.CancelledError:  # the response that wanted the summary was cancelled: so is the summary
        svc.cancel_running(record.id)
        raise
    finally:
        if not watch.done():
            watch.cancel()
    final = await scratch.get(record.id)
    response: dict[str, Any] = final.response if final is not None else record.response
    # A summary cut short is not a summary: continuing from it would drop what it had not yet said.
    if watch.done() and not watch.cancelled() and watch.exception() is None and watch.result():
        raise HTTPError(502, "summary_incomplete", "The model's summary of the conversation did not end within "
                        f"limits.compaction_max_output_tokens ({cap}): it was stopped there (raise the limit in "
                        "the config's [limits] table, or compact sooner)")
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason") or "unknown"
        raise HTTPError(502, "summary_incomplete",
                        f"The model's summary of the conversation did not finish (the upstream ended it: {reason})")
    if response.get("status") != "completed":
        error = response.get("error") or {}
        raise HTTPError(502, str(error.get("code") or "upstream_error"),
                        f"The model could not summarise the conversation: {error.get('message') or 'no answer'}")
    text = "".join(part.get("text", "") for item in response.get("output", []) if item.get("type") == "message"
                   for part in item.get("content", []) if part.get("type") == "output_text")
    usage = response.get("usage") or {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                                      "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                                      "total_tokens": 0}
    return Summary(text, str(response.get("model", model)), usage)


async def _stop_past_cap(svc: ResponseStarter, scratch: MemoryStore, response_id: str, cap: int) -> bool:
    """Stop the summarising response once it streams more than ``cap`` deltas (True: it was stopped). Each streamed
    delta holds at least one token, so no summary is stopped before ``cap`` tokens, and a model that never stops is
    stopped after at most ``cap`` of its deltas (an upstream writing several tokens a delta may reach more tokens
    first)."""
    deltas = 0
    async for entry in scratch.tail(response_id):
        if entry.type.endswith(".delta"):
            deltas += 1
            if deltas > cap:
                svc.cancel_running(response_id, "summary_incomplete",
                                   f"the summary passed limits.compaction_max_output_tokens = {cap}")
                return True
    return False


def _keeps(item: InputItem) -> bool:
    """Instructions given as messages stay verbatim; an earlier summary is summarised again."""
    return item.type == "message" and item.role in ("system", "developer") and not item.text.startswith(SUMMARY_PREFIX)


def _turn_start(items: list[InputItem], own_input: int) -> int:
    """Where the current turn starts: the request's input when there is history before it, else its last user
    message, else its last group of tool calls (0: the whole context is one turn, nothing to compact); never
    between a tool call and its output (:func:`_with_its_calls`)."""
    if own_input < len(items):
        return _with_its_calls(items, len(items) - own_input)
    for i in range(len(items) - 1, 0, -1):
        if items[i].type == "message" and items[i].role == "user":
            return _with_its_calls(items, i)
    for i in range(len(items) - 1, 0, -1):
        if items[i].type == "function_call" and items[i - 1].type != "function_call":
            return _with_its_calls(items, i)
    return 0


def _with_its_calls(items: list[InputItem], start: int) -> int:
    """``start`` moved back so that every tool output after it keeps its call, and a call the rest of the assistant
    turn it came in (its reasoning, signed thinking included, and text): providers pair a result with its call
    (Anthropic's tool_result right after its tool_use, Gemini's functionResponse after its functionCall, Chat's tool
    message after its tool_calls), and Anthropic wants the thinking of the turn that called. One backwards pass."""
    calls = {item.call_id: i for i, item in enumerate(items) if item.type == "function_call" and item.call_id}
    i = len(items) - 1
    while i >= start:  # (start only moves back, so each item is looked at once)
        item = items[i]
        if item.type == "function_call_output" and item.call_id in calls:
            start = min(start, calls[item.call_id])
        if i == start and i > 0 and _same_assistant_turn(items[i]) and _same_assistant_turn(items[i - 1]):
            start = i - 1
        i -= 1
    return start


def _same_assistant_turn(item: InputItem) -> bool:
    return item.type in ("reasoning", "function_call") or (item.type == "message" and item.role == "assistant")


async def plan_compaction(req: ResponseRequest, items: list[InputItem], messages: list[dict[str, Any]], *,
                          limit: ContextLimit | None, upstream: Any, model_id: str) -> CompactionPlan | None:
    """What to compact for ``req`` (see the module docstring), or None. Raises a 400 naming
    ``context_management[0].compact_threshold`` when none was given and the model's context window is unknown."""
    if req.compaction_trigger:
        kept = [i for i in items if _keeps(i)]
        compacted = [i for i in items if not _keeps(i)]
        if not compacted:
            raise HTTPError(400, "missing_required_parameter", "nothing to compact: the context holds no "
                            "conversation before the compaction_trigger", param="input")
        # Nothing is generated after it, so no context check; model_id: the summary runs on the routed model.
        return CompactionPlan(kept, compacted, [], True, estimated_tokens(messages), model_id=model_id)
    policy = req.compaction
    if policy is None:
        return None
    threshold = policy.threshold
    if threshold is None:
        if limit is None:
            raise HTTPError(400, "missing_required_parameter", "context_management[0].compact_threshold is needed: "
                            "the context window of this model is not known to the gateway",
                            param="context_management[0].compact_threshold")
        threshold = int(limit.tokens * DEFAULT_WINDOW_SHARE)
    tokens = estimated_tokens(messages)
    count = getattr(upstream, "count_tokens", None)
    if count is not None:  # the upstream's own tokenizer, where it has one (embedded model, llama.cpp)
        try:
            exact = await count(messages)
        except Exception:  # a tokenizer that fails: the estimate decides
            exact = None
        if isinstance(exact, int):
            tokens = exact
    if tokens <= threshold:
        return None
    start = _turn_start(items, len(req.input))
    before = items[:start]
    compacted = [i for i in before if not _keeps(i)]
    if not compacted:
        return None  # the current turn alone is over the threshold: nothing older to compact
    return CompactionPlan([i for i in before if _keeps(i)], compacted, items[start:], False, tokens, limit, upstream,
                          model_id)


def _usage_of(usage: dict[str, Any]) -> Usage:
    return Usage(input_tokens=int(usage.get("input_tokens") or 0), output_tokens=int(usage.get("output_tokens") or 0),
                 cached_tokens=int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0))


async def compact_step(pipeline: Pipeline, svc: ResponseStarter, plan: CompactionPlan, owner: str | None) -> None:
    """Summarise, emit the ``compaction`` item, and point the generation (and the stored record) at the compacted
    context; with the trigger, end the response. A summary that fails ends the response ``failed`` with its error."""
    w = pipeline.writer
    req = pipeline.request
    try:  # on the model this response was routed to: the long transcript is not routed again (elsewhere)
        summary = await summarise(svc, plan.compacted, instructions=None, model=plan.model_id or req.model,
                                  owner=owner, temperature=req.temperature)
    except HTTPError as exc:
        w.fail(exc.code, f"context compaction failed: {exc.message}")
        return
    item = {"type": "compaction", "id": svc.dialect.new_id("cmp"),
            "encrypted_content": encode_compaction(summary.text, summary.model)}
    w.finish_output_item(w.add_output_item(item), item)
    pipeline.compaction_item = item
    pipeline.compaction_tail = len(plan.tail)
    # A tail that goes on with the assistant's tool calls gets the summary as the user turn before them: Anthropic's
    # turns start with a user one, Gemini wants a function call right after a user turn.
    leads = not plan.tail or (plan.tail[0].type == "message" and plan.tail[0].role == "user")
    context = [*plan.kept, summary_item(summary.text, "system" if leads else "user"), *plan.tail]
    # The next turn of a previous_response_id chain starts from here (response_chain.py reads "context" whole).
    w.record.request["context"] = [i.to_json() for i in context]
    usage = _usage_of(summary.usage)
    if plan.trigger:
        w.complete(usage=usage)
        return
    pipeline.add_usage(usage)
    pipeline.messages = items_to_messages(req.instructions, context)
    try:  # the current turn alone may still be over the model's context
        await check_context(pipeline.messages, limit=plan.limit, max_output_tokens=req.max_output_tokens,
                            upstream=plan.upstream, model_id=plan.model_id)
    except HTTPError as exc:
        w.fail(exc.code, f"after compaction: {exc.message}")
