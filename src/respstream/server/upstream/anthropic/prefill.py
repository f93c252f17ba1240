"""Forced tool calls and structured output on a Messages server that applies neither ``output_config`` nor a forced
``tool_choice`` by itself, but forces a call after an assistant prefill: llama.cpp's ``/v1/messages`` with a
Hermes-style chat template (Qwen2.5's, whose calls open with ``<tool_call>``).

Why (measured on loopback, xllamacpp 2026.10.11549, Qwen2.5-Coder-1.5B; docs/gateway.md, anthropic+embedded):
llama.cpp turns ``tool_choice`` ``any``/``tool`` into its own ``required``, whose grammar still lets the model write
free text first: the model writes the call as a fenced JSON object in the text and then only newlines until
``max_tokens`` (no ``tool_use``). With an assistant turn that holds the template's call opener, the same grammar
holds the model to a call whose arguments follow the tool's schema (an ``enum`` and a ``minimum`` the prompt
contradicted were kept), and llama.cpp answers with ``tool_use`` blocks. It does not let the model stop after the
call: the call is repeated until ``max_tokens``, so the stream is ended after the first complete call
(:attr:`Prefilled.single_call`). llama.cpp drops ``output_config`` and its own ``json_schema`` / ``grammar`` /
``response_format`` fields on this endpoint, so structured output is a forced answer tool whose input schema is the
requested schema; its ``tool_use`` comes back as the answer text (:attr:`Prefilled.answer_tool`), which the pipeline
validates as for any upstream. A named ``tool_choice`` becomes llama.cpp's ``required`` without the name, so only
the named tool is offered; ``tool_choice`` ``none`` is not read there either: the tools are left out instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from respstream.server.upstream.provider_tools import RefusedField

__all__ = ["ANSWER_TOOL", "Prefilled", "drop_unread_none", "force_by_prefill", "prefilled_of"]

ANSWER_TOOL: Final = "structured_answer"  # the forced tool that carries a structured answer (never a client call)
_ANSWER_DESCRIPTION: Final = "Give your final answer as this tool's input, in exactly the requested format."


@dataclass(frozen=True, slots=True)
class Prefilled:
    """How to read the stream of a body :func:`force_by_prefill` rewrote."""

    single_call: bool = False  # the stream ends after the first complete tool_use (the server would repeat it)
    answer_tool: str | None = None  # a tool_use of this name is the answer text, not a call


def drop_unread_none(body: dict[str, Any]) -> None:
    """``tool_choice`` ``none`` on a server that ignores it: the tools are left out, so no call can happen."""
    if (body.get("tool_choice") or {}).get("type") == "none":
        body.pop("tools", None)
        body.pop("tool_choice", None)


def force_by_prefill(body: dict[str, Any], prefix: str) -> Prefilled:
    """Rewrite a body :func:`~.request.build_messages_body` built (``output_config``, ``tools``, ``tool_choice``)
    for a server that forces a call only after an assistant turn holding ``prefix``. Raises :class:`RefusedField`."""
    drop_unread_none(body)
    output = body.pop("output_config", None)
    choice = body.get("tool_choice") or {}
    forced = choice.get("type") in ("any", "tool")
    answer: str | None = None
    if output is not None and not forced:
        # (a forced client tool wins this turn: the structured answer comes on a later one)
        schema = output["format"]["schema"]
        if schema.get("type", "object") != "object":
            raise RefusedField("text.format.schema", "this server (llama.cpp's /v1/messages) gives structured "
                               "output as a forced tool's input, which must be a JSON object: use an object schema")
        tools: list[dict[str, Any]] = body.get("tools") or []
        if any(tool["name"] == ANSWER_TOOL for tool in tools):
            raise RefusedField("tools", f"a tool named {ANSWER_TOOL!r} is the name this server's structured output "
                               "uses; rename the tool")
        tools.append({"name": ANSWER_TOOL, "description": _ANSWER_DESCRIPTION,
                      "input_schema": {"type": "object", **schema}})
        body["tools"] = tools
        # (with client tools under auto the model may still call one of them: any call is forced, not which)
        body["tool_choice"] = {"type": "any"} if len(tools) > 1 else {"type": "tool", "name": ANSWER_TOOL}
        answer = ANSWER_TOOL
        forced = True
    if not forced:
        return Prefilled()
    if choice.get("type") == "tool":
        # (llama.cpp turns a named tool_choice into "required", losing the name: only that tool is offered)
        body["tools"] = [tool for tool in body.get("tools") or () if tool["name"] == choice["name"]]
    turns = body["messages"]
    if turns[-1]["role"] == "assistant":
        raise RefusedField("input", "on this server (llama.cpp's /v1/messages) a forced tool call or structured "
                           "output needs the input to end with a user message or a tool output, not an assistant "
                           "message")
    turns.append({"role": "assistant", "content": prefix})
    return Prefilled(single_call=True, answer_tool=answer)


def prefilled_of(body: dict[str, Any], prefix: str | None) -> Prefilled:
    """How to read the stream of ``body`` (read back from the body itself, so whatever sent it needs no more)."""
    turns = body.get("messages") or []
    if not prefix or not turns or turns[-1] != {"role": "assistant", "content": prefix}:
        return Prefilled()
    answers = any(tool.get("name") == ANSWER_TOOL for tool in body.get("tools") or ())
    return Prefilled(single_call=True, answer_tool=ANSWER_TOOL if answers else None)
