"""The pipeline's Chat-shaped generation request -> an Anthropic Messages body, every field mapped or refused.

How this works: system messages become ``system`` blocks (in order); the other messages become turns that alternate
by construction (consecutive same-role messages merge), each ``tool`` answer becomes a ``tool_result`` in the user
turn right after the assistant turn holding its ``tool_use`` (results first in that turn), and reasoning
(``provider_tools.REASONING_KEY``: the history's reasoning items, or a gateway tool round's own) goes back unchanged,
in place in its assistant turn. Images and PDFs (data or http(s) URLs) become ``image`` / ``document`` blocks. A field
Anthropic has no form for raises :class:`~respstream.server.upstream.provider_tools.RefusedField` naming the
Responses field. The mapping table is in docs/gateway.md#anthropic.
"""

from __future__ import annotations

import re
from typing import Any, Final

from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.cache_hints import CACHE_BREAKPOINT_KEY, CacheHints, breakpoint_ttl_seconds
from respstream.server.upstream.provider_tools import (
    REASONING_KEY,
    RefusedField,
    ToolNames,
    arguments_object,
    function_tools,
    tool_choice_of,
)

__all__ = ["DEFAULT_MAX_TOKENS", "LEAST_THINKING_BUDGET", "THINKING_BUDGETS", "build_messages_body", "tool_names"]

DEFAULT_MAX_TOKENS: Final = 8192
LEAST_THINKING_BUDGET: Final = 1024  # the API's smallest budget_tokens
# The most output tokens of the older models, whose limit is below the default (a larger max_tokens is a 400)
_OUTPUT_CAPS: Final = (("claude-3-5-", 8192), ("claude-3-opus", 4096), ("claude-3-sonnet", 4096),
                       ("claude-3-haiku", 4096))
# reasoning.effort -> thinking budget_tokens ("none"/"minimal": no thinking)
THINKING_BUDGETS: Final = {"low": 2048, "medium": 8192, "high": 24576, "xhigh": 32000}
_NAME_RULE: Final = re.compile(r"[a-zA-Z0-9_-]{1,128}")
_MAX_BREAKPOINTS: Final = 4  # cache_control blocks per request (the Messages API refuses a fifth)
_DEFAULT_LIFETIME: Final = 5 * 60  # a cache_control without "ttl" ("5m"); the only longer one is "1h"
_MARK: Final = "_respstream_cache_ttl"  # on a block while the body is built: a client breakpoint (0: default ttl)
# Anthropic's "auto" uses Priority Tier capacity where the account has it, "standard_only" never does
_SERVICE_TIERS: Final = {"auto": "auto", "default": "standard_only", "priority": "auto"}
# text.verbosity has no Anthropic setting: the gateway asks for it in the system prompt (medium: the model's own)
_VERBOSITY: Final = {"low": "Answer concisely: keep explanations short.",
                     "high": "Answer thoroughly: explain in detail."}
# Chat option key -> the Responses field a client set (what a refusal names)
_REFUSED: Final = {"presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
                   "logprobs": "top_logprobs", "top_logprobs": "top_logprobs"}
_HANDLED: Final = frozenset({"top_p", "reasoning_effort", "response_format", "parallel_tool_calls", "prompt_cache_key",
                             "safety_identifier", "user", "service_tier", "stop", "verbosity"})

def tool_names() -> ToolNames:
    return ToolNames(_NAME_RULE, 128)


def build_messages_body(request: GenerationRequest, *, model: str, names: ToolNames,
                        default_max_tokens: int = DEFAULT_MAX_TOKENS, sampling: bool = False,
                        least_thinking_budget: int = LEAST_THINKING_BUDGET) -> dict[str, Any]:
    """The streaming ``POST /v1/messages`` body. ``sampling``: send ``temperature``
    and ``top_p`` (today's Messages API, as its SDK types say, takes neither: they are refused unless a server that
    takes them is configured so). ``least_thinking_budget``: the API's smallest ``budget_tokens`` (llama.cpp has
    none). Raises :class:`RefusedField`."""
    options = request.options
    for key in options:
        if key in _REFUSED:
            raise RefusedField(_REFUSED[key], "Anthropic has no such setting")
        if key not in _HANDLED:
            raise RefusedField(key, "Anthropic has no such setting")
    system, turns = _turns(request.messages, names, request.cache)
    body: dict[str, Any] = {"model": model, "messages": turns, "stream": True}
    verbosity = options.get("verbosity")
    if verbosity is not None and verbosity not in (*_VERBOSITY, "medium"):
        raise RefusedField("text.verbosity", f"{verbosity!r} is not low, medium or high")
    if verbosity in _VERBOSITY:
        system.append({"type": "text", "text": _VERBOSITY[verbosity]})
    if system:
        body["system"] = system
    thinking = _thinking(options.get("reasoning_effort"), request.max_output_tokens, least_thinking_budget)
    cap = next((most for prefix, most in _OUTPUT_CAPS if model.startswith(prefix)), None)
    default = default_max_tokens + (thinking or 0)
    body["max_tokens"] = request.max_output_tokens or (default if cap is None else min(default, cap))
    if thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    _sampling(body, request, thinking is not None, sampling)
    if request.tools:
        body["tools"], body["tool_choice"] = _tools(request, names, thinking is not None)
    _output_format(body, options.get("response_format"))
    user = options.get("safety_identifier") or options.get("user")
    if user:
        body["metadata"] = {"user_id": str(user)}
    tier = options.get("service_tier")
    if tier is not None:
        if tier not in _SERVICE_TIERS:
            raise RefusedField("service_tier", f"{tier!r} has no Anthropic tier (auto, default or priority)")
        body["service_tier"] = _SERVICE_TIERS[tier]
    stop = options.get("stop")
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    _cache_breakpoints(body, request.cache, asked=request.cache.asked or bool(options.get("prompt_cache_key")))
    return body


def _thinking(effort: Any, max_output_tokens: int | None, least: int) -> int | None:
    if effort is None or effort in ("none", "minimal"):
        return None
    budget = THINKING_BUDGETS.get(str(effort))
    if budget is None:
        raise RefusedField("reasoning.effort", f"{effort!r} has no Anthropic thinking budget")
    if max_output_tokens is not None:
        if max_output_tokens <= least:
            raise RefusedField("max_output_tokens", f"Anthropic thinking (reasoning.effort) needs more than {least} "
                               f"output tokens (its smallest budget is {least})")
        budget = min(budget, max_output_tokens - 1)
    return max(least, budget)


def _sampling(body: dict[str, Any], request: GenerationRequest, thinking: bool, sampling: bool) -> None:
    temperature, top_p = request.temperature, request.options.get("top_p")
    for field, value in (("temperature", temperature), ("top_p", top_p)):
        if value is not None and not sampling:
            raise RefusedField(field, "the Anthropic Messages API takes no sampling settings (set the upstream's "
                               "sampling option for a server that does)")
    if temperature is not None:
        if not 0 <= temperature <= 1:
            raise RefusedField("temperature", "Anthropic takes 0 to 1")
        if thinking and temperature != 1:
            raise RefusedField("temperature", "Anthropic thinking (reasoning.effort) takes no temperature but 1")
        body["temperature"] = temperature
    if top_p is not None:
        if thinking and top_p < 0.95:
            raise RefusedField("top_p", "Anthropic thinking (reasoning.effort) takes top_p 0.95 to 1 only")
        body["top_p"] = top_p


def _tools(request: GenerationRequest, names: ToolNames, thinking: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for tool in function_tools(request.tools):
        schema = tool.parameters
        if schema.get("type", "object") != "object":
            raise RefusedField("tools", f"tool {tool.name!r}: Anthropic takes object parameters only")
        entry: dict[str, Any] = {"name": names.to_provider(tool.name), "input_schema": {"type": "object", **schema}}
        if tool.description:
            entry["description"] = tool.description
        if tool.strict:
            entry["strict"] = True
        tools.append(entry)
    choice = tool_choice_of(request.tool_choice)
    if thinking and choice.mode in ("required", "named"):
        raise RefusedField("tool_choice", "Anthropic thinking (reasoning.effort) cannot be combined with a forced "
                           "tool; use auto")
    chosen: dict[str, Any] = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
        choice.mode) or {"type": "tool", "name": names.to_provider(str(choice.name))}
    if request.options.get("parallel_tool_calls") is False and choice.mode != "none":
        chosen["disable_parallel_tool_use"] = True
    return tools, chosen


def _output_format(body: dict[str, Any], response_format: Any) -> None:
    if not isinstance(response_format, dict) or response_format.get("type") == "text":
        return
    if response_format.get("type") != "json_schema":
        raise RefusedField("text.format", f"type {response_format.get('type')!r} has no Anthropic form (use "
                           "json_schema)")
    spec = response_format.get("json_schema") or {}
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise RefusedField("text.format.schema", "a JSON Schema object is required")
    body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}


def _cache_breakpoints(body: dict[str, Any], hints: CacheHints, *, asked: bool) -> None:
    """``cache_control`` on the client's breakpoints and, unless ``mode`` is ``explicit``, the automatic ones (the
    last tool, the last system block, the last block of the last stable turn: the one before the newest) when
    caching was asked for; at most :data:`_MAX_BREAKPOINTS` in all.

    What is dropped first past four: in ``implicit`` mode the automatic ones keep at least one place (OpenAI's rule:
    one implicit breakpoint plus the latest three explicit ones), so the client's earliest breakpoint goes first;
    then automatic ones in the order tools, system, last stable turn, because a later breakpoint's prefix holds the
    earlier ones' (Anthropic reads the longest cached prefix ending at any breakpoint). The Messages API wants a
    longer lifetime before a shorter one in prompt order, so a breakpoint before a ``1h`` one is written ``1h``
    too."""
    blocks = [*body.get("tools", ()), *body.get("system", ())] + [
        b for turn in body["messages"] for b in turn["content"]]
    explicit = [b for b in blocks if _MARK in b]
    automatic: list[dict[str, Any]] = []
    if asked and hints.mode != "explicit":
        turns = body["messages"]
        stable = [b for b in turns[-2]["content"] if b.get("type") not in ("thinking", "redacted_thinking")] \
            if len(turns) >= 2 else []
        candidates = [stable[-1] if stable else None, (body.get("system") or [None])[-1],
                      (body.get("tools") or [None])[-1]]  # (most useful first)
        automatic = [b for b in candidates if b is not None and all(b is not e for e in explicit)]
    if automatic:
        explicit = explicit[-(_MAX_BREAKPOINTS - 1):]
    chosen = explicit + automatic[:_MAX_BREAKPOINTS - len(explicit)]
    lifetime = {id(b): b.get(_MARK, hints.ttl_seconds or 0) for b in chosen}
    longest_after = 0
    for block in reversed(blocks):  # (prompt order, back to front: a breakpoint takes the longest lifetime after it)
        block.pop(_MARK, None)
        if id(block) not in lifetime:
            continue
        longest_after = max(longest_after, lifetime[id(block)])
        block["cache_control"] = {"type": "ephemeral", "ttl": "1h"} if longest_after > _DEFAULT_LIFETIME \
            else {"type": "ephemeral"}


# -- messages --------------------------------------------------------------------------------------------------------

def _turns(messages: list[dict[str, Any]], names: ToolNames, hints: CacheHints
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    called: dict[str, int] = {}  # tool_use id -> its assistant turn's index
    for n, message in enumerate(messages):
        role = message.get("role")
        where = f"input (message {n})"
        if role in ("system", "developer"):
            texts = [b for b in _blocks(message.get("content"), where) if b["type"] == "text"]
            system += texts
            _mark(texts, message, hints)
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
                      "content": _text(message.get("content"))}
            _place_result(turns, called, result)
        elif role == "assistant":
            blocks = _assistant_blocks(message, names, where)
            _mark([b for b in blocks if b["type"] not in ("thinking", "redacted_thinking")], message, hints)
            if blocks:
                turn = _append(turns, "assistant", blocks)
                for block in blocks:
                    if block["type"] == "tool_use":
                        called[block["id"]] = turn
        else:
            blocks = _blocks(message.get("content"), where)
            _mark(blocks, message, hints)
            if blocks:
                _append(turns, "user", blocks)
    if not turns:
        raise RefusedField("input", "Anthropic needs at least one user or assistant message besides instructions")
    for each in turns:
        _fold_blank_text(each["content"])
    return system, turns


def _mark(blocks: list[dict[str, Any]], message: dict[str, Any], hints: CacheHints) -> None:
    """A client's breakpoint on ``message`` (server/inputs/history.py) goes on its last block: the gateway joins a
    message's text parts, so the cached prefix ends with the message."""
    if blocks and CACHE_BREAKPOINT_KEY in message:
        blocks[-1][_MARK] = breakpoint_ttl_seconds(message[CACHE_BREAKPOINT_KEY], hints) or 0


def _fold_blank_text(blocks: list[dict[str, Any]]) -> None:
    """The API refuses a text block of whitespace only (Claude streams one, ``"\n\n"``, before its thinking): it
    goes into the turn's next text block, so the text stays whole and the thinking leads its turn."""
    pending = ""
    kept: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "text" and not block["text"].strip():
            pending += block["text"]
            continue
        if pending and block["type"] == "text":
            block = {**block, "text": pending + block["text"]}
            pending = ""
        kept.append(block)
    blocks[:] = kept


def _append(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> int:
    """Append ``blocks`` as a turn of ``role``, merged into the last turn when it has that role; its index."""
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})
    return len(turns) - 1


def _place_result(turns: list[dict[str, Any]], called: dict[str, int], result: dict[str, Any]) -> None:
    """A ``tool_result`` goes in the user turn right after its ``tool_use``, after the results already there."""
    at = called.get(result["tool_use_id"])
    if at is None:  # (history without the call: as text, which any turn may hold)
        _append(turns, "user", [{"type": "text", "text": f"Tool result ({result['tool_use_id']}): "
                                 f"{result['content'] or '(empty)'}"}])
        return
    if at + 1 < len(turns) and turns[at + 1]["role"] == "user":
        content = turns[at + 1]["content"]
        first_other = next((i for i, b in enumerate(content) if b["type"] != "tool_result"), len(content))
        content.insert(first_other, result)
    else:
        turns.insert(at + 1, {"role": "user", "content": [result]})
        for key, index in called.items():
            if index > at:
                called[key] = index + 1


def _assistant_blocks(message: dict[str, Any], names: ToolNames, where: str) -> list[dict[str, Any]]:
    calls = message.get("tool_calls") or []
    kept = message.get(REASONING_KEY) or []
    # (reasoning that came after the turn's other items, "after": it goes back after them, in place)
    blocks = _reasoning_blocks([entry for entry in kept if not entry.get("after")])
    blocks += [b for b in _blocks(message.get("content"), where) if b["type"] == "text"]
    for call in calls:
        function = call.get("function") or {}
        blocks.append({"type": "tool_use", "id": str(call.get("id") or ""),
                       "name": names.to_provider(str(function.get("name") or "")),
                       "input": arguments_object(str(function.get("arguments") or ""), f"{where}: tool call "
                                                 f"{call.get('id')!r} arguments")})
    return blocks + _reasoning_blocks([entry for entry in kept if entry.get("after")])


def _reasoning_blocks(items: Any) -> list[dict[str, Any]]:
    """History reasoning items as the API gave them: a summary (even empty) marks ``thinking`` with its signature;
    none marks ``redacted_thinking`` whose data is the encrypted content."""
    blocks: list[dict[str, Any]] = []
    for item in items or ():
        encrypted = item.get("encrypted_content")
        if not isinstance(encrypted, str) or not encrypted:
            continue  # (another provider's reasoning, or none kept: Anthropic would refuse a thinking block)
        if item.get("summary") is None:
            blocks.append({"type": "redacted_thinking", "data": encrypted})
        else:
            blocks.append({"type": "thinking", "thinking": str(item.get("summary")), "signature": encrypted})
    return blocks


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or () if isinstance(p, dict))


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and part.get("text"):
            blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "image_url":
            blocks.append(_image((part.get("image_url") or {}).get("url", ""), where))
        elif kind == "file":
            blocks.append(_document(part.get("file") or {}, where))
        elif kind != "text":
            raise RefusedField(where, f"content part {kind!r} has no Anthropic form")
    return blocks


def _data_url(url: str) -> tuple[str, str] | None:
    if not url.startswith("data:") or ";base64," not in url[:200]:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def _image(url: str, where: str) -> dict[str, Any]:
    inline = _data_url(url)
    if inline is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise RefusedField(where, "an image must be an http(s) URL or a base64 data URL")


def _document(file: dict[str, Any], where: str) -> dict[str, Any]:
    data = str(file.get("file_data") or "")
    inline = _data_url(data)
    filename = str(file.get("filename") or "")
    if inline is None and data and filename.lower().endswith(".pdf"):
        inline = ("application/pdf", data)  # (bare base64, named as a PDF)
    if inline is not None:
        if inline[0] != "application/pdf":
            raise RefusedField(where, f"file type {inline[0]!r} has no Anthropic document form (PDF only)")
        block: dict[str, Any] = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                                "data": inline[1]}}
    elif str(file.get("file_url") or "").startswith(("http://", "https://")):
        block = {"type": "document", "source": {"type": "url", "url": file["file_url"]}}
    else:
        raise RefusedField(where, "a file must be a PDF as base64 (file_data) or an http(s) file_url")
    if filename:
        block["title"] = filename
    return block
