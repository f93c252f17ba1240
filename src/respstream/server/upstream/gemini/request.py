"""A :class:`~respstream.server.upstream.base.GenerationRequest` -> the JSON body of Gemini's
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` (sans-IO).

Every field the pipeline hands over is mapped or refused (:class:`RequestRefused`, a 400 naming the field):

==============================================  ================================================================
``messages``                                    ``systemInstruction`` + ``contents`` (gemini/contents.py)
``tools`` (function tools, namespaces already   ``tools: [{"functionDeclarations": [{name, description,
flattened to ``ns__name`` by the core)          parametersJsonSchema}]}]``; a name Gemini does not allow -> 400
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
``service_tier`` auto/default                   Gemini's default: not sent (any other tier -> 400)
``logprobs``, ``top_logprobs``, ``verbosity``,  400: no Gemini streaming equivalent this adapter maps
``user``, ``safety_identifier``
==============================================  ================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.gemini.contents import build_contents
from respstream.server.upstream.provider_request import RequestRefused

__all__ = ["THINKING_BUDGETS", "build_body", "check_function_name"]

THINKING_BUDGETS: Final = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768}
_SAMPLING: Final = {"top_p": "topP", "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty"}
_REFUSED: Final = {
    "logprobs": "logprobs / top_logprobs", "top_logprobs": "top_logprobs", "verbosity": "text.verbosity",
    "user": "user", "safety_identifier": "safety_identifier",
}
_NOT_SENT: Final = frozenset({"parallel_tool_calls", "prompt_cache_key"})
_MODES: Final = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")


def check_function_name(name: str, param: str) -> None:
    """Gemini's rule for a function name: a letter or ``_`` first, then letters, digits, ``_ . : -``; 64 at most."""
    if not name or len(name) > 64 or not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")) \
            or not set(name) <= _NAME_CHARS:
        raise RequestRefused(param, f"{param}: function name {name!r} is not one Gemini accepts (a letter or _ "
                                    "first, then letters, digits, _ . : -; at most 64 characters)")


def build_body(request: GenerationRequest, remembered: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The request body. ``remembered``: call id -> signature (gemini/contents.py). Raises :class:`RequestRefused`."""
    system, contents = build_contents(request.messages, remembered)
    if not contents:
        raise RequestRefused("input", "input: Gemini needs at least one user or model turn besides instructions")
    body: dict[str, Any] = {"contents": contents}
    if system is not None:
        body["systemInstruction"] = system
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t, i) for i, t in enumerate(request.tools)]}]
        if request.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _calling_config(request.tool_choice)}
    config = _generation_config(request)
    if config:
        body["generationConfig"] = config
    return body


def _declaration(tool: dict[str, Any], i: int) -> dict[str, Any]:
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, dict):
        raise RequestRefused(f"tools[{i}]", f"tools[{i}]: only function tools can be given to Gemini "
                                            f"(not {tool.get('type')!r})")
    name = str(function.get("name") or "")
    check_function_name(name, f"tools[{i}].name")
    out: dict[str, Any] = {"name": name}
    description = function.get("description")
    if isinstance(description, str) and description:
        out["description"] = description
    parameters = function.get("parameters")
    if isinstance(parameters, dict) and parameters:
        # Gemini validates a JSON Schema here as it is (its `parameters` takes only an OpenAPI subset); `strict` is
        # how Gemini treats function arguments anyway: they follow the schema.
        out["parametersJsonSchema"] = parameters
    return out


def _calling_config(choice: Any) -> dict[str, Any]:
    if isinstance(choice, str):
        mode = _MODES.get(choice)
        if mode is None:
            raise RequestRefused("tool_choice", f"tool_choice {choice!r} has no Gemini equivalent")
        return {"mode": mode}
    function = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return {"mode": "ANY", "allowedFunctionNames": [function["name"]]}
    raise RequestRefused("tool_choice", f"tool_choice {choice!r} has no Gemini equivalent")


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
                raise RequestRefused("reasoning.effort", f"reasoning.effort {value!r} has no Gemini thinking budget")
            config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True} if budget else {
                "thinkingBudget": 0}
        elif key == "response_format":
            config.update(_response_format(value))
        elif key == "service_tier":
            if value not in ("auto", "default"):
                raise RequestRefused("service_tier", f"service_tier {value!r} has no Gemini equivalent")
        elif key in _REFUSED:
            raise RequestRefused(_REFUSED[key].split(" / ")[0],
                                 f"{_REFUSED[key]} is not supported by the Gemini upstream")
        else:
            raise RequestRefused(key, f"{key} is not supported by the Gemini upstream")
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
            raise RequestRefused("text.format.schema", "text.format.schema must be a JSON Schema object")
        return {"responseMimeType": "application/json", "responseJsonSchema": schema}
    raise RequestRefused("text.format", f"text.format {kind!r} has no Gemini equivalent")
