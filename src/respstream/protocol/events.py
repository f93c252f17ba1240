"""The typed catalogue of Responses stream events.

How this works: every event is a frozen msgspec Struct tagged on its JSON ``type``. One module-level decoder turns
the bytes of an SSE ``data`` field straight into the right class. Every field except ``type`` has a default, so old
recordings (no ``sequence_number``) and sloppy servers (no ``output_index``) still decode; ``rules.py`` reports what
is missing. A ``type`` we do not know becomes :class:`UnknownEvent` — never an error. A known ``type`` whose fields
have the wrong JSON types is decoded leniently (the bad fields are dropped and listed in ``invalid_fields``), because a
wrong field is a protocol violation, not a reason to stop reading.

Nested objects (``response``, ``item``, ``part``) stay plain dicts: the assembler reads a few keys from them and the
rest must round-trip untouched, including fields that do not exist yet.

Why one module: one tagged union (STYLE §3), ~80 event Structs and the decoder built once over all of them.
"""

from __future__ import annotations

from typing import Any, Final, Union

import msgspec

__all__ = [
    "AFTER_TERMINAL_TYPES",
    "ALIAS_NAMES",
    "ALL_EVENT_TYPES",
    "EVENT_ALIASES",
    "EVENT_CLASSES",
    "EXTENSION_PREFIX",
    "TERMINAL_RESPONSE_TYPES",
    "AudioDelta",
    "AudioDone",
    "AudioTranscriptDelta",
    "AudioTranscriptDone",
    "CodeInterpreterCallCodeDelta",
    "CodeInterpreterCallCodeDone",
    "CodeInterpreterCallCompleted",
    "CodeInterpreterCallInProgress",
    "CodeInterpreterCallInterpreting",
    "CompactionCompacting",
    "ContentPartAdded",
    "ContentPartDone",
    "CustomToolCallInputDelta",
    "CustomToolCallInputDone",
    "ErrorEvent",
    "Event",
    "EventDecodeError",
    "FileSearchCallCompleted",
    "FileSearchCallInProgress",
    "FileSearchCallSearching",
    "FunctionCallArgumentsDelta",
    "FunctionCallArgumentsDone",
    "ImageGenerationCallCompleted",
    "ImageGenerationCallGenerating",
    "ImageGenerationCallInProgress",
    "ImageGenerationCallPartialImage",
    "McpCallArgumentsDelta",
    "McpCallArgumentsDone",
    "McpCallCompleted",
    "McpCallFailed",
    "McpCallInProgress",
    "McpListToolsCompleted",
    "McpListToolsFailed",
    "McpListToolsInProgress",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextAnnotationAdded",
    "OutputTextDelta",
    "OutputTextDone",
    "PrefixedRewriteInProgress",
    "PrefixedRoutingCompleted",
    "RateLimitsUpdated",
    "ReasoningDelta",
    "ReasoningDone",
    "ReasoningSummaryPartAdded",
    "ReasoningSummaryPartDone",
    "ReasoningSummaryTextDelta",
    "ReasoningSummaryTextDone",
    "ReasoningTextDelta",
    "ReasoningTextDone",
    "RefusalDelta",
    "RefusalDone",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseEvent",
    "ResponseFailed",
    "ResponseInProgress",
    "ResponseIncomplete",
    "ResponseQueued",
    "RewriteInProgress",
    "RoutingCompleted",
    "ShellCallCommandAdded",
    "ShellCallCommandDelta",
    "ShellCallCommandDone",
    "ShellCallOutputContentDelta",
    "ShellCallOutputContentDone",
    "SteerAccepted",
    "SteerFailed",
    "SteerPending",
    "UnknownEvent",
    "WebSearchCallCompleted",
    "WebSearchCallInProgress",
    "WebSearchCallSearching",
    "decode_event",
    "encode_event",
    "with_aliases",
]

JSONObject = dict[str, Any]


class EventDecodeError(ValueError):
    """The ``data`` of an event is not a JSON object (invalid JSON, an array, a string...)."""


class Event(msgspec.Struct, tag_field="type", frozen=True, kw_only=True, omit_defaults=True):
    """Base of every event. ``type`` is the struct tag; ``sequence_number`` may be absent in old recordings."""

    sequence_number: int | None = None

    # Names of fields the peer sent with the wrong JSON type (dropped while decoding); empty for a clean event.
    invalid_fields: tuple[str, ...] = ()

    @property
    def type(self) -> str:
        return str(self.__struct_config__.tag)


# --- lifecycle (spec §2.2) ------------------------------------------------------------------------------------------


class ResponseEvent(Event, frozen=True, kw_only=True, omit_defaults=True):
    """A lifecycle event carrying a full (or, on the seed platform, partial) Response object."""

    response: JSONObject | None = None


class ResponseCreated(ResponseEvent, tag="response.created", frozen=True):
    pass


class ResponseQueued(ResponseEvent, tag="response.queued", frozen=True):
    pass


class ResponseInProgress(ResponseEvent, tag="response.in_progress", frozen=True):
    pass


class ResponseCompleted(ResponseEvent, tag="response.completed", frozen=True):
    pass


class ResponseIncomplete(ResponseEvent, tag="response.incomplete", frozen=True):
    pass


class ResponseFailed(ResponseEvent, tag="response.failed", frozen=True):
    pass


class ErrorEvent(Event, tag="error", frozen=True):
    """Both wire shapes: flat ``code/message/param`` (spec, seed platform) and nested ``error: {...}`` (OpenAI wire)."""

    code: str | None = None
    message: str | None = None
    param: str | None = None
    error: JSONObject | None = None

    @property
    def error_code(self) -> str | None:
        if self.code is not None:
            return self.code
        if self.error is not None:
            nested = self.error.get("code") or self.error.get("type")
            return None if nested is None else str(nested)
        return None

    @property
    def error_message(self) -> str | None:
        if self.message is not None:
            return self.message
        if self.error is not None and self.error.get("message") is not None:
            return str(self.error["message"])
        return None


# --- items and parts (spec §2.3) ------------------------------------------------------------------------------------


class OutputItemAdded(Event, tag="response.output_item.added", frozen=True):
    output_index: int | None = None
    item: JSONObject | None = None


class OutputItemDone(Event, tag="response.output_item.done", frozen=True):
    output_index: int | None = None
    item: JSONObject | None = None


class ContentPartAdded(Event, tag="response.content_part.added", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    part: JSONObject | None = None


class ContentPartDone(Event, tag="response.content_part.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    part: JSONObject | None = None


# --- text, refusal, annotations (spec §2.4) -------------------------------------------------------------------------


class OutputTextDelta(Event, tag="response.output_text.delta", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None
    logprobs: list[Any] | None = None
    obfuscation: str | None = None


class OutputTextDone(Event, tag="response.output_text.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    text: str | None = None
    logprobs: list[Any] | None = None


class OutputTextAnnotationAdded(Event, tag="response.output_text.annotation.added", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    annotation_index: int | None = None
    annotation: JSONObject | None = None


class RefusalDelta(Event, tag="response.refusal.delta", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None
    obfuscation: str | None = None


class RefusalDone(Event, tag="response.refusal.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    refusal: str | None = None


# --- function calls and custom tools (spec §2.5) --------------------------------------------------------------------


class FunctionCallArgumentsDelta(Event, tag="response.function_call_arguments.delta", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    delta: str | None = None
    obfuscation: str | None = None


class FunctionCallArgumentsDone(Event, tag="response.function_call_arguments.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    arguments: str | None = None
    name: str | None = None  # required by the spec, absent in every real capture


class CustomToolCallInputDelta(Event, tag="response.custom_tool_call_input.delta", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    delta: str | None = None
    obfuscation: str | None = None


class CustomToolCallInputDone(Event, tag="response.custom_tool_call_input.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    input: str | None = None


# --- reasoning (spec §2.6) ------------------------------------------------------------------------------------------


class ReasoningSummaryPartAdded(Event, tag="response.reasoning_summary_part.added", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    summary_index: int | None = None
    part: JSONObject | None = None


class ReasoningSummaryPartDone(Event, tag="response.reasoning_summary_part.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    summary_index: int | None = None
    part: JSONObject | None = None
    status: str | None = None


class ReasoningSummaryTextDelta(Event, tag="response.reasoning_summary_text.delta", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    summary_index: int | None = None
    delta: str | None = None
    obfuscation: str | None = None


class ReasoningSummaryTextDone(Event, tag="response.reasoning_summary_text.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    summary_index: int | None = None
    text: str | None = None


class ReasoningTextDelta(Event, tag="response.reasoning_text.delta", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None
    obfuscation: str | None = None


class ReasoningTextDone(Event, tag="response.reasoning_text.done", frozen=True):
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    text: str | None = None


# --- hosted tools (spec §2.7) ---------------------------------------------------------------------------------------


class _ItemEvent(Event, frozen=True, kw_only=True, omit_defaults=True):
    """A status-only hosted-tool event: it says which item, nothing more."""

    item_id: str | None = None
    output_index: int | None = None


class WebSearchCallInProgress(_ItemEvent, tag="response.web_search_call.in_progress", frozen=True):
    pass


class WebSearchCallSearching(_ItemEvent, tag="response.web_search_call.searching", frozen=True):
    pass


class WebSearchCallCompleted(_ItemEvent, tag="response.web_search_call.completed", frozen=True):
    pass


class FileSearchCallInProgress(_ItemEvent, tag="response.file_search_call.in_progress", frozen=True):
    pass


class FileSearchCallSearching(_ItemEvent, tag="response.file_search_call.searching", frozen=True):
    pass


class FileSearchCallCompleted(_ItemEvent, tag="response.file_search_call.completed", frozen=True):
    pass


class CodeInterpreterCallInProgress(_ItemEvent, tag="response.code_interpreter_call.in_progress", frozen=True):
    pass


class CodeInterpreterCallCodeDelta(_ItemEvent, tag="response.code_interpreter_call_code.delta", frozen=True):
    delta: str | None = None
    obfuscation: str | None = None


class CodeInterpreterCallCodeDone(_ItemEvent, tag="response.code_interpreter_call_code.done", frozen=True):
    code: str | None = None


class CodeInterpreterCallInterpreting(_ItemEvent, tag="response.code_interpreter_call.interpreting", frozen=True):
    pass


class CodeInterpreterCallCompleted(_ItemEvent, tag="response.code_interpreter_call.completed", frozen=True):
    pass


class ImageGenerationCallInProgress(_ItemEvent, tag="response.image_generation_call.in_progress", frozen=True):
    pass


class ImageGenerationCallGenerating(_ItemEvent, tag="response.image_generation_call.generating", frozen=True):
    pass


class ImageGenerationCallPartialImage(_ItemEvent, tag="response.image_generation_call.partial_image", frozen=True):
    partial_image_b64: str | None = None
    partial_image_index: int | None = None
    background: str | None = None
    output_format: str | None = None
    quality: str | None = None
    size: str | None = None


class ImageGenerationCallCompleted(_ItemEvent, tag="response.image_generation_call.completed", frozen=True):
    pass


class McpListToolsInProgress(_ItemEvent, tag="response.mcp_list_tools.in_progress", frozen=True):
    pass


class McpListToolsCompleted(_ItemEvent, tag="response.mcp_list_tools.completed", frozen=True):
    pass


class McpListToolsFailed(_ItemEvent, tag="response.mcp_list_tools.failed", frozen=True):
    pass


class McpCallInProgress(_ItemEvent, tag="response.mcp_call.in_progress", frozen=True):
    pass


class McpCallArgumentsDelta(_ItemEvent, tag="response.mcp_call_arguments.delta", frozen=True):
    delta: str | None = None
    obfuscation: str | None = None


class McpCallArgumentsDone(_ItemEvent, tag="response.mcp_call_arguments.done", frozen=True):
    arguments: str | None = None


class McpCallCompleted(_ItemEvent, tag="response.mcp_call.completed", frozen=True):
    pass


class McpCallFailed(_ItemEvent, tag="response.mcp_call.failed", frozen=True):
    pass


class ShellCallCommandAdded(Event, tag="response.shell_call_command.added", frozen=True):
    output_index: int | None = None
    command_index: int | None = None
    command: str | None = None


class ShellCallCommandDelta(Event, tag="response.shell_call_command.delta", frozen=True):
    output_index: int | None = None
    command_index: int | None = None
    delta: str | None = None
    obfuscation: str | None = None


class ShellCallCommandDone(Event, tag="response.shell_call_command.done", frozen=True):
    output_index: int | None = None
    command_index: int | None = None
    command: str | None = None


class ShellCallOutputContentDelta(_ItemEvent, tag="response.shell_call_output_content.delta", frozen=True):
    command_index: int | None = None
    delta: JSONObject | None = None


class ShellCallOutputContentDone(_ItemEvent, tag="response.shell_call_output_content.done", frozen=True):
    command_index: int | None = None
    output: list[Any] | None = None


# --- audio (spec §2.8; response-level, no item fields) --------------------------------------------------------------


class AudioDelta(Event, tag="response.audio.delta", frozen=True):
    delta: str | None = None


class AudioDone(Event, tag="response.audio.done", frozen=True):
    pass


class AudioTranscriptDelta(Event, tag="response.audio.transcript.delta", frozen=True):
    delta: str | None = None


class AudioTranscriptDone(Event, tag="response.audio.transcript.done", frozen=True):
    pass


# --- newer OpenAI families (openai-python 3.x types; spec §2.9 where documented) ------------------------------------
# Compaction and steering are in the SDK's ResponseStreamEvent / ResponsesServerEvent unions; rate_limits.updated is
# not typed there yet but OpenAI's live API sends it, after response.completed (peers.md #35).


class CompactionCompacting(_ItemEvent, tag="response.compaction.compacting", frozen=True):
    """New summary content is being sampled for a compaction item (no content; at most every 30 s)."""


class RateLimitsUpdated(Event, tag="response.rate_limits.updated", frozen=True):
    """The account's rate-limit windows; response-level, may follow the terminal event."""

    rate_limits: list[Any] | None = None


class SteerAccepted(Event, tag="response.steer.accepted", frozen=True):
    """Steering input was validated and queued (WebSocket lanes); response-level."""

    steer: JSONObject | None = None
    stream_id: str | None = None


class SteerPending(Event, tag="response.steer.pending", frozen=True):
    """Accepted steering input is still queued after the response completed; OpenAI sends it after the terminal."""

    steer: JSONObject | None = None
    reason: str | None = None
    required_input: list[Any] | None = None
    stream_id: str | None = None


class SteerFailed(Event, tag="response.steer.failed", frozen=True):
    """Steering input was rejected or could not be committed; carries the input back."""

    steer: JSONObject | None = None
    error: JSONObject | None = None
    stream_id: str | None = None


# --- the seed platform's own events (platform-eugpt.md) -------------------------------------------------------------


class RoutingCompleted(Event, tag="response.routing.completed", frozen=True):
    model_id: str | None = None
    category: str | None = None
    source: str | None = None
    reasoning: str | None = None


class RewriteInProgress(Event, tag="response.rewrite.in_progress", frozen=True):
    pass


# --- other dialects' names for the same events ---------------------------------------------------------------------
# Open Responses names raw reasoning `response.reasoning.*` (OpenAI: `response.reasoning_text.*`) and asks every
# extension to carry the implementor slug, so the gateway's `openai` and `openresponses` dialects send the platform's
# own events as `respstream:<name>`. Each alias is a subclass of the event it renames: code that asks
# `isinstance(e, RoutingCompleted)` sees both, and `type` stays the name on the wire.

EXTENSION_PREFIX: Final = "respstream:"


class ReasoningDelta(ReasoningTextDelta, tag="response.reasoning.delta", frozen=True):
    """Open Responses' ``response.reasoning.delta`` (OpenAI: ``response.reasoning_text.delta``)."""


class ReasoningDone(ReasoningTextDone, tag="response.reasoning.done", frozen=True):
    """Open Responses' ``response.reasoning.done`` (OpenAI: ``response.reasoning_text.done``)."""


class PrefixedRoutingCompleted(RoutingCompleted, tag=EXTENSION_PREFIX + "response.routing.completed", frozen=True):
    """``respstream:response.routing.completed`` (the openai and openresponses dialects)."""


class PrefixedRewriteInProgress(RewriteInProgress, tag=EXTENSION_PREFIX + "response.rewrite.in_progress", frozen=True):
    """``respstream:response.rewrite.in_progress`` (the openai and openresponses dialects)."""


# alias class -> the event class it renames (dispatch tables keyed by class add the aliases from here)
EVENT_ALIASES: Final[dict[type[Event], type[Event]]] = {
    ReasoningDelta: ReasoningTextDelta,
    ReasoningDone: ReasoningTextDone,
    PrefixedRoutingCompleted: RoutingCompleted,
    PrefixedRewriteInProgress: RewriteInProgress,
}

# event type -> the other names it goes by on the wire (for handlers registered by name)
ALIAS_NAMES: Final[dict[str, tuple[str, ...]]] = {
    str(canon.__struct_config__.tag): tuple(
        str(a.__struct_config__.tag) for a, c in EVENT_ALIASES.items() if c is canon)
    for canon in EVENT_ALIASES.values()
}


def with_aliases(table: dict[type[Event], Any]) -> dict[type[Event], Any]:
    """``table`` (keyed by event class) plus an entry for each alias of a class in it, with the same value."""
    return {**table, **{alias: table[canon] for alias, canon in EVENT_ALIASES.items() if canon in table}}


# --- anything else --------------------------------------------------------------------------------------------------


class UnknownEvent(Event, tag="__unknown__", frozen=True):
    """An event whose ``type`` we do not know (``keepalive``, future events). Ignored by assembly, never fatal."""

    event_type: str = ""
    raw: JSONObject = msgspec.field(default_factory=dict)

    @property
    def type(self) -> str:
        return self.event_type


EVENT_CLASSES: Final[tuple[type[Event], ...]] = (
    ResponseCreated,
    ResponseQueued,
    ResponseInProgress,
    ResponseCompleted,
    ResponseIncomplete,
    ResponseFailed,
    ErrorEvent,
    OutputItemAdded,
    OutputItemDone,
    ContentPartAdded,
    ContentPartDone,
    OutputTextDelta,
    OutputTextDone,
    OutputTextAnnotationAdded,
    RefusalDelta,
    RefusalDone,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    CustomToolCallInputDelta,
    CustomToolCallInputDone,
    ReasoningSummaryPartAdded,
    ReasoningSummaryPartDone,
    ReasoningSummaryTextDelta,
    ReasoningSummaryTextDone,
    ReasoningTextDelta,
    ReasoningTextDone,
    WebSearchCallInProgress,
    WebSearchCallSearching,
    WebSearchCallCompleted,
    FileSearchCallInProgress,
    FileSearchCallSearching,
    FileSearchCallCompleted,
    CodeInterpreterCallInProgress,
    CodeInterpreterCallCodeDelta,
    CodeInterpreterCallCodeDone,
    CodeInterpreterCallInterpreting,
    CodeInterpreterCallCompleted,
    ImageGenerationCallInProgress,
    ImageGenerationCallGenerating,
    ImageGenerationCallPartialImage,
    ImageGenerationCallCompleted,
    McpListToolsInProgress,
    McpListToolsCompleted,
    McpListToolsFailed,
    McpCallInProgress,
    McpCallArgumentsDelta,
    McpCallArgumentsDone,
    McpCallCompleted,
    McpCallFailed,
    ShellCallCommandAdded,
    ShellCallCommandDelta,
    ShellCallCommandDone,
    ShellCallOutputContentDelta,
    ShellCallOutputContentDone,
    AudioDelta,
    AudioDone,
    AudioTranscriptDelta,
    AudioTranscriptDone,
    CompactionCompacting,
    RateLimitsUpdated,
    SteerAccepted,
    SteerPending,
    SteerFailed,
    RoutingCompleted,
    RewriteInProgress,
    *EVENT_ALIASES,
)

_BY_TYPE: Final[dict[str, type[Event]]] = {str(cls.__struct_config__.tag): cls for cls in EVENT_CLASSES}
# Each event class's `type` as a plain class attribute (it shadows Event.type): the property builds a StructConfig on
# every read (~0.1 µs), and the checker, the assembler and the dispatchers read it on every event.
for _name, _cls in _BY_TYPE.items():
    _cls.type = _name  # type: ignore[misc,assignment]
del _name, _cls
ALL_EVENT_TYPES: Final[frozenset[str]] = frozenset(_BY_TYPE)
TERMINAL_RESPONSE_TYPES: Final[frozenset[str]] = frozenset(
    {"response.completed", "response.incomplete", "response.failed"}
)
# Response-level notices OpenAI documents (or sends) after the terminal event: not part of the response's life, so
# never lifecycle.terminal_not_last (rate limits follow response.completed; steer.pending "is emitted after
# response.completed" per the SDK's docstring).
AFTER_TERMINAL_TYPES: Final[frozenset[str]] = frozenset({"response.rate_limits.updated", "response.steer.pending"})

_union_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(Union[EVENT_CLASSES])  # type: ignore[valid-type]  # noqa: UP007
_object_decoder = msgspec.json.Decoder(type=dict[str, Any])
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def decode_event(data: bytes | str) -> Event:
    """Decode one SSE ``data`` payload into a typed event.

    Raises :class:`EventDecodeError` when the payload is not a JSON object. An object without a string ``type``
    decodes to an :class:`UnknownEvent` with ``event_type == ""`` (rules report ``envelope.missing_type``).
    """
    try:
        return _union_decoder.decode(data)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        pass  # unknown tag, no tag, or a known tag with a wrong field type: take the slow, lenient path
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"event data is not valid JSON: {exc}") from None
    try:
        obj = _object_decoder.decode(data)
    except msgspec.ValidationError:
        try:
            kind = type(_any_decoder.decode(data)).__name__
        except msgspec.DecodeError as exc:  # e.g. "[DONE]": starts like an array, is not JSON at all
            raise EventDecodeError(f"event data is not valid JSON: {exc}") from None
        raise EventDecodeError(f"event data is a JSON {_json_kind(kind)}, not an object") from None
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"event data is not valid JSON: {exc}") from None
    return _lenient(obj)


def _json_kind(python_name: str) -> str:
    return {"list": "array", "str": "string", "int": "number", "float": "number", "bool": "boolean"}.get(
        python_name, "null" if python_name == "NoneType" else python_name
    )


def _lenient(obj: dict[str, Any]) -> Event:
    event_type = obj.get("type")
    seq = obj.get("sequence_number")
    seq_ok = isinstance(seq, int) and not isinstance(seq, bool)
    cls = _BY_TYPE.get(event_type) if isinstance(event_type, str) else None
    if cls is None:
        return UnknownEvent(
            sequence_number=seq if seq_ok else None,
            event_type=event_type if isinstance(event_type, str) else "",
            raw=obj,
        )
    # A known type with some field of the wrong JSON type: drop the offenders one by one, remember their names.
    fields = {k: v for k, v in obj.items() if k != "type" and k in cls.__struct_fields__}
    fields.pop("invalid_fields", None)
    dropped: list[str] = []
    while True:
        try:
            event = msgspec.convert(fields, cls)
            break
        except msgspec.ValidationError as exc:
            bad = _offending_field(str(exc), fields)
            if bad is None:  # cannot tell which one: keep only the sequence number
                dropped.extend(k for k in fields if k != "sequence_number" or not seq_ok)
                event = cls(sequence_number=seq if seq_ok else None)
                break
            dropped.append(bad)
            del fields[bad]
    return msgspec.structs.replace(event, invalid_fields=tuple(dropped))


def _offending_field(message: str, fields: dict[str, Any]) -> str | None:
    # msgspec names the path as "... - at `$.field`" or "`$.field[0]`"
    marker = "`$."
    start = message.find(marker)
    if start < 0:
        return None
    rest = message[start + len(marker) :]
    name = rest.split("`", 1)[0].split("[", 1)[0].split(".", 1)[0]
    return name if name in fields else None


def encode_event(event: Event) -> bytes:
    """Encode an event as compact JSON, ``type`` included. An :class:`UnknownEvent` re-encodes its raw payload."""
    if isinstance(event, UnknownEvent):
        return _encoder.encode(event.raw)
    return _encoder.encode(event)
