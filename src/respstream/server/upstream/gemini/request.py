"""A :class:`~respstream.server.upstream.base.GenerationRequest` -> the JSON body of Gemini's
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` (sans-IO).

Every field the pipeline hands over is mapped or refused (:class:`RefusedField`, a 400 naming the field):

==============================================  ================================================================
``messages``                                    ``systemInstruction`` + ``contents`` (gemini/contents.py)
``tools`` (function tools, namespaces already   ``tools: [{"functionDeclarations": [{name, description,
flattened to ``ns__name`` by the core)          parametersJsonSchema}]}]``; a name Gemini does not allow gets a
                                                stable safe name (upstream/provider_tools.py ``ToolNames``),
                                                restored on the calls that come back
``tool_choice`` auto / required / none /        ``toolConfig.functionCallingConfig.mode`` AUTO / ANY / NONE;
a named function                                ANY + ``allowedFunctionNames: [name]``
``max_output_tokens``                           ``generationConfig.maxOutputTokens``
``temperature``, ``top_p``                      ``temperature``, ``topP``
``presence_penalty``, ``frequency_penalty``     ``presencePenalty``, ``frequencyPenalty``
``stop``                                        ``stopSequences``
``text.format`` json_schema / json_object       ``responseMimeType: application/json`` (+ ``responseJsonSchema``)
``reasoning.effort``                            ``thinkingConfig``: ``thinkingBudget`` (none 0, minimal 512, low
                                                1024, medium 8192, high 24576, xhigh 32768) + ``includeThoughts``
``parallel_tool_calls``                         enforced by the gateway (one call kept when false): not sent
``prompt_cache_key``                            the gateway's session affinity (Gemini caches implicitly): not sent
``text.verbosity`` low / high                   asked for in ``systemInstruction`` (medium: the model's own)
``service_tier`` auto/default/priority          Gemini's standard tier: not sent (flex -> 400)
``logprobs``, ``top_logprobs``, ``user``,       400: no Gemini streaming equivalent this adapter maps
``safety_identifier``
==============================================  ================================================================
"""

from __future__ import annotations

import re
from typing import Any, Final

from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.gemini.contents import build_contents
from respstream.server.upstream.provider_tools import (
    FunctionTool,
    RefusedField,
    ToolChoice,
    ToolNames,
    function_tools,
    tool_choice_of,
)

__all__ = ["THINKING_BUDGETS", "build_body", "gemini_tool_names"]

THINKING_BUDGETS: Final = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768}
_SAMPLING: Final = {"top_p": "topP", "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty"}
_REFUSED: Final = {
    "logprobs": "top_logprobs", "top_logprobs": "top_logprobs", "user": "user",
    "safety_identifier": "safety_identifier",
}
_NOT_SENT: Final = frozenset({"parallel_tool_calls", "prompt_cache_key", "verbosity"})
# Tiers with nothing to send: Gemini serves a request at its standard tier (priority: the best it has for it; Codex
# CLI sends priority). Flex, a cheaper and slower tier, is refused rather than billed at standard.
_SERVICE_TIERS: Final = frozenset({"auto", "default", "priority"})
# text.verbosity has no Gemini setting: the gateway asks for it in the system instruction (medium: the model's own)
_VERBOSITY: Final = {"low": "Answer concisely: keep explanations short.",
                     "high": "Answer thoroughly: explain in detail."}
_MODES: Final = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
# Gemini's rule for a function name: a letter or _ first, then letters, digits, _ . : -; 64 characters at most.
_GEMINI_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*")


def gemini_tool_names() -> ToolNames:
    """Flat tool names <-> names Gemini accepts (a name it refuses gets a stable safe one; calls come back under the
    pipeline's name)."""
    return ToolNames(_GEMINI_NAME, 64)


def build_body(request: GenerationRequest, names: ToolNames) -> dict[str, Any]:
    """The request body. ``names``: the adapter's :func:`gemini_tool_names`. Raises
    :class:`~respstream.server.upstream.provider_tools.RefusedField`."""
    system, contents = build_contents(request.messages, names.to_provider)
    if not contents:
        raise RefusedField("input", "Gemini needs at least one user or model turn besides the instructions")
    verbosity = request.options.get("verbosity")
    if verbosity is not None and verbosity not in (*_VERBOSITY, "medium"):
        raise RefusedField("text.verbosity", f"{verbosity!r} is not low, medium or high")
    if verbosity in _VERBOSITY:
        system = {"parts": [*(system or {}).get("parts", []), {"text": _VERBOSITY[verbosity]}]}
    body: dict[str, Any] = {"contents": contents}
    if system is not None:
        body["systemInstruction"] = system
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t, names) for t in function_tools(request.tools)]}]
        if request.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _calling_config(tool_choice_of(request.tool_choice),
                                                                           names)}
    config = _generation_config(request)
    if config:
        body["generationConfig"] = config
    return body


def _declaration(tool: FunctionTool, names: ToolNames) -> dict[str, Any]:
    out: dict[str, Any] = {"name": names.to_provider(tool.name)}
    if tool.description:
        out["description"] = tool.description
    if tool.parameters:
        # Gemini validates a JSON Schema here as it is (its `parameters` takes only an OpenAPI subset); `strict` is
        # how Gemini treats function arguments anyway: they follow the schema.
        out["parametersJsonSchema"] = tool.parameters
    return out


def _calling_config(choice: ToolChoice, names: ToolNames) -> dict[str, Any]:
    if choice.mode == "named" and choice.name:
        return {"mode": "ANY", "allowedFunctionNames": [names.to_provider(choice.name)]}
    return {"mode": _MODES[choice.mode]}


def _generation_config(request: GenerationRequest) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.max_output_tokens is not None:
        config["maxOutputTokens"] = request.max_output_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    for key, value in request.options.items():
        if value is None or key in _NOT_SENT:
            continue
        if key in _SAMPLING:
            config[_SAMPLING[key]] = value
        elif key == "stop":
            config["stopSequences"] = [value] if isinstance(value, str) else list(value)
        elif key == "reasoning_effort":
            budget = THINKING_BUDGETS.get(str(value))
            if budget is None:
                raise RefusedField("reasoning.effort", f"{value!r} has no Gemini thinking budget")
            config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True} if budget else {
                "thinkingBudget": 0}
        elif key == "response_format":
            config.update(_response_format(value))
        elif key == "service_tier":
            if value not in _SERVICE_TIERS:
                raise RefusedField("service_tier", f"{value!r} has no Gemini equivalent (auto, default or priority)")
        elif key in _REFUSED:
            raise RefusedField(_REFUSED[key], "Gemini's streaming API has no such field this gateway can map")
        else:
            raise RefusedField(key, "not supported by the Gemini upstream")
    return config


def _response_format(value: Any) -> dict[str, Any]:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return {}
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        schema = (value.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise RefusedField("text.format.schema", "must be a JSON Schema object")
        return {"responseMimeType": "application/json", "responseJsonSchema": schema}
    raise RefusedField("text.format", f"{kind!r} has no Gemini equivalent")
