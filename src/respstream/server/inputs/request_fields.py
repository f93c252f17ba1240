"""The option fields of ``POST /v1/responses`` beyond input, tools and model: validated into :class:`RequestFields`.

How this works: :func:`parse_fields` reads every sampling, output-format, reasoning, caching, safety and streaming
field the Open Responses ``CreateResponseBody`` (and OpenAI's Responses API) defines, checks its type and range and
returns them typed. Each is then either forwarded to the upstream (see
:mod:`~respstream.server.responses.chat_request`), implemented by the gateway (``truncation``, ``max_tool_calls``,
``text.format`` validation, ``include``) or refused here with 400 ``unsupported_parameter`` naming it. Every decision
is listed in docs/compatibility.md; ``tests/server/test_request_fields_spec.py`` walks the spec's field list so a new
field cannot slip through.

Top-level fields nobody defines are accepted and reported, or refused under ``strict_fields``
(:mod:`~respstream.server.inputs.field_policy`); every field the spec or OpenAI defines is decided here or in
:mod:`~respstream.server.inputs.requests`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.field_policy import parse_access_programs
from respstream.server.inputs.prompt_cache import PromptCache, parse_prompt_cache
from respstream.server.inputs.structured_output import TextFormat, parse_text_format

__all__ = [
    "COMPLETION_WINDOWS",
    "INCLUDE_VALUES",
    "REASONING_EFFORTS",
    "SERVICE_TIERS",
    "RequestFields",
    "parse_fields",
]

INCLUDE_VALUES = frozenset({
    # Reasoning is returned as plain `content` text (nothing is encrypted), so a client that asks for the encrypted
    # form to send it back gets what it needs: the item round-trips through `input` as it is.
    "reasoning.encrypted_content",
    "message.output_text.logprobs",  # logprobs on the text deltas and parts (turns on `logprobs` upstream)
    "web_search_call.action.sources",  # the gateway's web_search items carry their sources
})
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# reasoning.context (which earlier reasoning items the model sees again; Codex sends "all_turns"): any value is
# taken, and the Response echoes the effective mode, "current_turn": the gateway never renders reasoning items back
# to an upstream (its upstreams take none), which is what that mode means.
_REASONING_CONTEXTS = ("auto", "current_turn", "all_turns")
_REASONING_SUMMARIES = ("auto",)  # "concise"/"detailed" would need a summariser the gateway does not have
SERVICE_TIERS = ("auto", "default", "flex", "priority")
_VERBOSITY = ("low", "medium", "high")
_TRUNCATION = ("auto", "disabled")
_MAX_TOP_LOGPROBS = 20
_MAX_ID_CHARS = 64  # safety_identifier, prompt_cache_key (spec maxLength)


@dataclass(slots=True)
class RequestFields:
    """The option fields as used. ``None`` means "not given" (the upstream's default applies)."""

    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_logprobs: int | None = None
    reasoning_effort: str | None = None
    reasoning_summary: str | None = None
    reasoning_context: str | None = None  # as asked; echoed as the effective "current_turn"
    max_tool_calls: int | None = None
    truncation: str = "disabled"  # the OpenAI default
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    user: str | None = None
    include: list[str] = field(default_factory=list)
    text_format: TextFormat = field(default_factory=TextFormat)
    verbosity: str | None = None
    include_obfuscation: bool | None = None
    prompt_cache: PromptCache = field(default_factory=PromptCache)  # read by the caches and provider adapters
    access_programs: dict[str, str] | None = None
    completion_window: str | None = None  # background_options.completion_window: deferred work (responses/deferred)

    @property
    def logprobs(self) -> bool:
        """True when token logprobs are wanted (``top_logprobs`` given or asked for through ``include``)."""
        return self.top_logprobs is not None or "message.output_text.logprobs" in self.include

    def echo(self) -> dict[str, Any]:
        """These fields as the Response object echoes them (the values used; ``None``: the upstream's default)."""
        return {
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "top_logprobs": self.top_logprobs,
            "reasoning": self.reasoning_json(),
            "max_tool_calls": self.max_tool_calls,
            "truncation": self.truncation,
            "prompt_cache_key": self.prompt_cache_key,
            "safety_identifier": self.safety_identifier,
            "service_tier": self.service_tier or "default",
            "text": self.text_json(),
            "user": self.user,
        }

    def late_echo(self) -> dict[str, Any]:
        """The late-2026 fields the Response echoes, only when the request gave them (older clients see nothing
        new): ``prompt_cache_options`` / ``prompt_cache_retention`` and ``access_programs``."""
        echo = self.prompt_cache.echo()
        if self.access_programs is not None:
            echo["access_programs"] = self.access_programs
        return echo

    def reasoning_json(self) -> dict[str, Any]:
        """The ``reasoning`` object as echoed in the Response."""
        echo = {"effort": self.reasoning_effort, "summary": self.reasoning_summary}
        if self.reasoning_context is not None:
            echo["context"] = "current_turn"
        return echo

    def text_json(self) -> dict[str, Any]:
        """The ``text`` object as echoed in the Response."""
        text: dict[str, Any] = {"format": self.text_format.to_json()}
        if self.verbosity is not None:
            text["verbosity"] = self.verbosity
        return text


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def _unsupported(message: str, param: str) -> HTTPError:
    return _bad(message, param, "unsupported_parameter")


def _number(value: Any, param: str, low: float, high: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(f"{param} must be a number", param, "invalid_type")
    if not low <= value <= high:
        raise _bad(f"{param} must be between {low:g} and {high:g}", param)
    return float(value)


def _integer(value: Any, param: str, low: int, high: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{param} must be an integer", param, "invalid_type")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise _bad(f"{param} must be {bound}", param)
    return value


def _choice(value: Any, param: str, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        raise _bad(f"{param} must be one of {', '.join(allowed)}", param)
    return value


def _short_string(value: Any, param: str, limit: int = _MAX_ID_CHARS) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(f"{param} must be a string", param, "invalid_type")
    if len(value) > limit:
        raise _bad(f"{param} must be at most {limit} characters (got {len(value)})", param)
    return value


def _object(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"{param} must be an object", param, "invalid_type")
    return value


def _only_keys(obj: dict[str, Any], param: str, known: tuple[str, ...]) -> None:
    for key in obj:
        if key not in known:
            raise _unsupported(f"{param}.{key} is not supported (known: {', '.join(known)})", f"{param}.{key}")


def _include(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _bad("include must be a list of strings", "include", "invalid_type")
    values: list[str] = []
    for i, value in enumerate(raw):
        if not isinstance(value, str):
            raise _bad(f"include[{i}] must be a string", f"include[{i}]", "invalid_type")
        if value not in INCLUDE_VALUES:
            raise _unsupported(f"include[{i}] {value!r} is not supported (supported: "
                               f"{', '.join(sorted(INCLUDE_VALUES))})", f"include[{i}]")
        values.append(value)
    return values


COMPLETION_WINDOWS = ("soonest", "2h", "8h")


def _completion_window(body: dict[str, Any]) -> str | None:
    """``background_options``: ``completion_window`` queues a background response as deferred work (run when
    interactive load leaves room, before its window ends); it needs ``background: true``, and 2h/8h need
    ``stream: false`` (as OpenAI). ``continuation_id`` is refused: the gateway has nothing it could continue."""
    options = _object(body.get("background_options"), "background_options")
    if not options:
        return None
    _only_keys(options, "background_options", ("completion_window",))
    window = options.get("completion_window")
    if window is None:
        return None
    if not isinstance(window, str) or window not in COMPLETION_WINDOWS:
        raise _bad(f"background_options.completion_window must be one of {', '.join(COMPLETION_WINDOWS)}",
                   "background_options.completion_window")
    if body.get("background") is not True:
        raise _bad("background_options.completion_window needs background: true", "background_options")
    if window != "soonest" and body.get("stream") is True:
        raise _bad(f"background_options.completion_window {window!r} needs stream: false (retrieve the response, "
                   "or stream it with GET /v1/responses/{id}?stream=true once it runs)", "stream")
    return window


# Every top-level field :func:`parse_fields` reads besides the ones ``parse_prompt_cache`` reads itself.
_OPTION_FIELDS = frozenset({
    "prompt", "response_format", "reasoning", "text", "stream_options", "presence_penalty", "frequency_penalty",
    "top_logprobs", "max_tool_calls", "truncation", "prompt_cache_key", "safety_identifier", "service_tier", "user",
    "include", "access_programs", "background_options",
})


def parse_fields(body: dict[str, Any]) -> RequestFields:
    """Validate the option fields of a decoded request body. Raises :class:`HTTPError` (400) naming the field."""
    if _OPTION_FIELDS.isdisjoint(body):
        # The common request sends none of them: their defaults, without ~20 helper calls that each find nothing
        # (issue 41; equal to the full parse, tests/server/test_request_fast_paths.py). A field sent as null
        # takes the full path.
        return RequestFields(prompt_cache=parse_prompt_cache(body))
    return _parse_given(body)


def _parse_given(body: dict[str, Any]) -> RequestFields:
    if body.get("prompt") is not None:
        raise _unsupported("prompt is not supported by this gateway", "prompt")
    if body.get("response_format") is not None:
        raise _unsupported("response_format is a Chat Completions field; the Responses API uses text.format",
                           "response_format")
    reasoning = _object(body.get("reasoning"), "reasoning")
    _only_keys(reasoning, "reasoning", ("effort", "summary", "generate_summary", "context"))
    summary = reasoning.get("summary", reasoning.get("generate_summary"))
    if summary is not None and summary not in _REASONING_SUMMARIES:
        raise _unsupported(f"reasoning.summary {summary!r} is not supported (the gateway returns the model's own "
                           "reasoning text, not a summary; use 'auto' or leave it out)", "reasoning.summary")
    text = _object(body.get("text"), "text")
    _only_keys(text, "text", ("format", "verbosity"))
    options = _object(body.get("stream_options"), "stream_options")
    _only_keys(options, "stream_options", ("include_obfuscation",))
    obfuscation = options.get("include_obfuscation")
    if obfuscation is not None and not isinstance(obfuscation, bool):
        raise _bad("stream_options.include_obfuscation must be a boolean", "stream_options.include_obfuscation",
                   "invalid_type")
    if obfuscation:
        raise _unsupported("stream_options.include_obfuscation: true is not supported (the gateway never pads "
                           "delta events; send false or leave it out)", "stream_options.include_obfuscation")
    return RequestFields(
        presence_penalty=_number(body.get("presence_penalty"), "presence_penalty", -2.0, 2.0),
        frequency_penalty=_number(body.get("frequency_penalty"), "frequency_penalty", -2.0, 2.0),
        top_logprobs=_integer(body.get("top_logprobs"), "top_logprobs", 0, _MAX_TOP_LOGPROBS),
        reasoning_effort=_choice(reasoning.get("effort"), "reasoning.effort", REASONING_EFFORTS),
        reasoning_summary=summary,
        reasoning_context=_choice(reasoning.get("context"), "reasoning.context", _REASONING_CONTEXTS),
        max_tool_calls=_integer(body.get("max_tool_calls"), "max_tool_calls", 1),
        truncation=_choice(body.get("truncation"), "truncation", _TRUNCATION) or "disabled",
        prompt_cache_key=_short_string(body.get("prompt_cache_key"), "prompt_cache_key"),
        safety_identifier=_short_string(body.get("safety_identifier"), "safety_identifier"),
        service_tier=_choice(body.get("service_tier"), "service_tier", SERVICE_TIERS),
        user=_short_string(body.get("user"), "user", 256),
        include=_include(body.get("include")),
        text_format=parse_text_format(text.get("format")),
        verbosity=_choice(text.get("verbosity"), "text.verbosity", _VERBOSITY),
        include_obfuscation=obfuscation,
        prompt_cache=parse_prompt_cache(body),
        access_programs=parse_access_programs(body.get("access_programs")),
        completion_window=_completion_window(body),
    )
