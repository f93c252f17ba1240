"""The Open Responses schemas (spec 2026-04-24) as typed msgspec Structs: what ``check`` validates against.

How this works: each Struct mirrors one schema of the spec's OpenAPI file (``components.schemas``, same name): a
field without a default is in the schema's ``required`` list, ``X | None`` is a nullable field, ``Literal`` an
enum, a field defaulting to ``UNSET`` is optional. Unknown fields are ignored, as the spec lets implementors add
fields. ``tests/protocol/test_spec_schema.py`` walks the vendored OpenAPI file and fails when a field or its
required-ness differs, so these cannot drift from the spec.

:func:`response_problems` and :func:`event_problems` return what is wrong with one decoded Response object or one
stream event (empty: valid), naming the JSON path. Extensions are not judged against the spec: an event or an
output item whose ``type`` carries an implementor prefix (``respstream:...``) is skipped here (and checked for
the prefix by :mod:`respstream.protocol.spec_rules`).

Why one module of ~500 lines: it mirrors one file, the spec's OpenAPI schemas (one Struct each), as its test walks it.
"""

from __future__ import annotations

from typing import Any, Final, Literal, Union

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["EVENT_SCHEMAS", "SCHEMAS", "SPEC_EVENT_TYPES", "SPEC_ITEM_TYPES", "SPEC_VERSION", "event_problems",
           "is_extension", "response_problems"]

SPEC_VERSION: Final = "2026-04-24"


class _S(msgspec.Struct, frozen=True, kw_only=True):
    """Base: frozen, keyword-only; unknown fields ignored."""


class _T(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of the members of a union discriminated on ``type``."""


Status = Literal["in_progress", "completed", "incomplete"]


# --- content -----------------------------------------------------------------------------------------------------


class TopLogProb(_S, frozen=True, kw_only=True):
    token: str
    logprob: float
    bytes: list[int]


class LogProb(_S, frozen=True, kw_only=True):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogProb]


class UrlCitationBody(_T, tag="url_citation", frozen=True, kw_only=True):
    url: str
    start_index: int
    end_index: int
    title: str


Annotation = UrlCitationBody


class InputTextContent(_T, tag="input_text", frozen=True, kw_only=True):
    text: str


class OutputTextContent(_T, tag="output_text", frozen=True, kw_only=True):
    text: str
    annotations: list[Annotation]
    logprobs: list[LogProb] | UnsetType = UNSET


class TextContent(_T, tag="text", frozen=True, kw_only=True):
    text: str


class SummaryTextContent(_T, tag="summary_text", frozen=True, kw_only=True):
    text: str


class ReasoningTextContent(_T, tag="reasoning_text", frozen=True, kw_only=True):
    text: str


class RefusalContent(_T, tag="refusal", frozen=True, kw_only=True):
    refusal: str


class InputImageContent(_T, tag="input_image", frozen=True, kw_only=True):
    image_url: str | None
    detail: Literal["low", "high", "auto"]


class InputFileContent(_T, tag="input_file", frozen=True, kw_only=True):
    filename: str | UnsetType = UNSET
    file_url: str | UnsetType = UNSET


class InputVideoContent(_T, tag="input_video", frozen=True, kw_only=True):
    video_url: str


ItemContent = Union[  # noqa: UP007
    InputTextContent, OutputTextContent, TextContent, SummaryTextContent, ReasoningTextContent, RefusalContent,
    InputImageContent, InputFileContent,
]
MessageContent = Union[ItemContent, InputVideoContent]  # noqa: UP007


# --- items -------------------------------------------------------------------------------------------------------


class Message(_T, tag="message", frozen=True, kw_only=True):
    id: str
    status: Status
    role: Literal["user", "assistant", "system", "developer"]
    content: list[MessageContent]
    phase: Literal["commentary", "final_answer"] | UnsetType = UNSET


class FunctionCall(_T, tag="function_call", frozen=True, kw_only=True):
    id: str
    call_id: str
    name: str
    arguments: str
    status: Status


class FunctionCallOutput(_T, tag="function_call_output", frozen=True, kw_only=True):
    id: str
    call_id: str
    output: str | list[Union[InputTextContent, InputImageContent, InputFileContent]]  # noqa: UP007
    status: Status


class ReasoningBody(_T, tag="reasoning", frozen=True, kw_only=True):
    id: str
    content: list[ItemContent] | UnsetType = UNSET
    summary: list[ItemContent]
    encrypted_content: str | UnsetType = UNSET


class CompactionBody(_T, tag="compaction", frozen=True, kw_only=True):
    id: str
    encrypted_content: str
    created_by: str | UnsetType = UNSET


ItemField = Union[Message, FunctionCall, FunctionCallOutput, ReasoningBody, CompactionBody]  # noqa: UP007


# --- the Response ------------------------------------------------------------------------------------------------


class Error(_S, frozen=True, kw_only=True):
    code: str
    message: str


class IncompleteDetails(_S, frozen=True, kw_only=True):
    reason: str


class InputTokensDetails(_S, frozen=True, kw_only=True):
    cached_tokens: int


class OutputTokensDetails(_S, frozen=True, kw_only=True):
    reasoning_tokens: int


class Usage(_S, frozen=True, kw_only=True):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens_details: OutputTokensDetails


class Reasoning(_S, frozen=True, kw_only=True):
    effort: Literal["none", "low", "medium", "high", "xhigh"] | None
    summary: Literal["concise", "detailed", "auto"] | None


class TextResponseFormat(_T, tag="text", frozen=True, kw_only=True):
    pass


class JsonObjectResponseFormat(_T, tag="json_object", frozen=True, kw_only=True):
    pass


class JsonSchemaResponseFormat(_T, tag="json_schema", frozen=True, kw_only=True):
    name: str
    description: str | None
    schema: None  # the spec's OpenAPI file types it `null` only (its zod schema too)
    strict: bool


class TextField(_S, frozen=True, kw_only=True):
    format: Union[TextResponseFormat, JsonObjectResponseFormat, JsonSchemaResponseFormat]  # noqa: UP007
    verbosity: Literal["low", "medium", "high"] | UnsetType = UNSET


class FunctionTool(_T, tag="function", frozen=True, kw_only=True):
    name: str
    description: str | None
    parameters: dict[str, Any] | None
    strict: bool | None


Tool = FunctionTool


class FunctionToolChoice(_T, tag="function", frozen=True, kw_only=True):
    name: str | UnsetType = UNSET


class AllowedToolChoice(_T, tag="allowed_tools", frozen=True, kw_only=True):
    tools: list[FunctionToolChoice]
    mode: Literal["none", "auto", "required"]


ToolChoice = Union[FunctionToolChoice, AllowedToolChoice, Literal["none", "auto", "required"]]  # noqa: UP007


class ResponseResource(_S, frozen=True, kw_only=True):
    id: str
    object: Literal["response"]
    created_at: int
    completed_at: int | None
    status: str
    incomplete_details: IncompleteDetails | None
    model: str
    previous_response_id: str | None
    instructions: str | None
    output: list[ItemField]
    error: Error | None
    tools: list[Tool]
    tool_choice: ToolChoice
    truncation: Literal["auto", "disabled"]
    parallel_tool_calls: bool
    text: TextField
    top_p: float
    presence_penalty: float
    frequency_penalty: float
    top_logprobs: int
    temperature: float
    reasoning: Reasoning | None
    usage: Usage | None
    max_output_tokens: int | None
    max_tool_calls: int | None
    store: bool
    background: bool
    service_tier: str
    metadata: Any
    safety_identifier: str | None
    prompt_cache_key: str | None


# --- stream events -----------------------------------------------------------------------------------------------


class _Event(_T, frozen=True, kw_only=True):
    sequence_number: int


class _ResponseEvent(_Event, frozen=True, kw_only=True):
    response: ResponseResource


class ResponseCreatedStreamingEvent(_ResponseEvent, tag="response.created", frozen=True, kw_only=True):
    pass


class ResponseQueuedStreamingEvent(_ResponseEvent, tag="response.queued", frozen=True, kw_only=True):
    pass


class ResponseInProgressStreamingEvent(_ResponseEvent, tag="response.in_progress", frozen=True, kw_only=True):
    pass


class ResponseCompletedStreamingEvent(_ResponseEvent, tag="response.completed", frozen=True, kw_only=True):
    pass


class ResponseFailedStreamingEvent(_ResponseEvent, tag="response.failed", frozen=True, kw_only=True):
    pass


class ResponseIncompleteStreamingEvent(_ResponseEvent, tag="response.incomplete", frozen=True, kw_only=True):
    pass


class ResponseOutputItemAddedStreamingEvent(_Event, tag="response.output_item.added", frozen=True, kw_only=True):
    output_index: int
    item: ItemField | None


class ResponseOutputItemDoneStreamingEvent(_Event, tag="response.output_item.done", frozen=True, kw_only=True):
    output_index: int
    item: ItemField | None


class ResponseReasoningSummaryPartAddedStreamingEvent(_Event, tag="response.reasoning_summary_part.added",
                                                      frozen=True, kw_only=True):
    item_id: str
    output_index: int
    summary_index: int
    part: ItemContent


class ResponseReasoningSummaryPartDoneStreamingEvent(_Event, tag="response.reasoning_summary_part.done",
                                                     frozen=True, kw_only=True):
    item_id: str
    output_index: int
    summary_index: int
    part: ItemContent


class _PartEvent(_Event, frozen=True, kw_only=True):
    item_id: str
    output_index: int
    content_index: int


class ResponseContentPartAddedStreamingEvent(_PartEvent, tag="response.content_part.added", frozen=True, kw_only=True):
    part: ItemContent


class ResponseContentPartDoneStreamingEvent(_PartEvent, tag="response.content_part.done", frozen=True, kw_only=True):
    part: ItemContent


class ResponseOutputTextDeltaStreamingEvent(_PartEvent, tag="response.output_text.delta", frozen=True, kw_only=True):
    delta: str
    logprobs: list[LogProb] | UnsetType = UNSET
    obfuscation: str | UnsetType = UNSET


class ResponseOutputTextDoneStreamingEvent(_PartEvent, tag="response.output_text.done", frozen=True, kw_only=True):
    text: str
    logprobs: list[LogProb] | UnsetType = UNSET


class ResponseRefusalDeltaStreamingEvent(_PartEvent, tag="response.refusal.delta", frozen=True, kw_only=True):
    delta: str


class ResponseRefusalDoneStreamingEvent(_PartEvent, tag="response.refusal.done", frozen=True, kw_only=True):
    refusal: str


class ResponseReasoningDeltaStreamingEvent(_PartEvent, tag="response.reasoning.delta", frozen=True, kw_only=True):
    delta: str
    obfuscation: str | UnsetType = UNSET


class ResponseReasoningDoneStreamingEvent(_PartEvent, tag="response.reasoning.done", frozen=True, kw_only=True):
    text: str


class ResponseReasoningSummaryDeltaStreamingEvent(_Event, tag="response.reasoning_summary_text.delta",
                                                  frozen=True, kw_only=True):
    item_id: str
    output_index: int
    summary_index: int
    delta: str
    obfuscation: str | UnsetType = UNSET


class ResponseReasoningSummaryDoneStreamingEvent(_Event, tag="response.reasoning_summary_text.done", frozen=True,
                                                 kw_only=True):
    item_id: str
    output_index: int
    summary_index: int
    text: str


class ResponseOutputTextAnnotationAddedStreamingEvent(_PartEvent, tag="response.output_text.annotation.added",
                                                      frozen=True, kw_only=True):
    annotation_index: int
    annotation: Annotation | None


class ResponseFunctionCallArgumentsDeltaStreamingEvent(_Event, tag="response.function_call_arguments.delta",
                                                       frozen=True, kw_only=True):
    item_id: str
    output_index: int
    delta: str
    obfuscation: str | UnsetType = UNSET


class ResponseFunctionCallArgumentsDoneStreamingEvent(_Event, tag="response.function_call_arguments.done",
                                                      frozen=True, kw_only=True):
    item_id: str
    output_index: int
    arguments: str


class ErrorPayload(_S, frozen=True, kw_only=True):
    type: str
    code: str | None
    message: str
    param: str | None
    headers: dict[str, str] | UnsetType = UNSET


class ErrorStreamingEvent(_Event, tag="error", frozen=True, kw_only=True):
    error: ErrorPayload


EVENT_SCHEMAS: Final[tuple[type[_Event], ...]] = (
    ResponseCreatedStreamingEvent, ResponseQueuedStreamingEvent, ResponseInProgressStreamingEvent,
    ResponseCompletedStreamingEvent, ResponseFailedStreamingEvent, ResponseIncompleteStreamingEvent,
    ResponseOutputItemAddedStreamingEvent, ResponseOutputItemDoneStreamingEvent,
    ResponseReasoningSummaryPartAddedStreamingEvent, ResponseReasoningSummaryPartDoneStreamingEvent,
    ResponseContentPartAddedStreamingEvent, ResponseContentPartDoneStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent, ResponseOutputTextDoneStreamingEvent, ResponseRefusalDeltaStreamingEvent,
    ResponseRefusalDoneStreamingEvent, ResponseReasoningDeltaStreamingEvent, ResponseReasoningDoneStreamingEvent,
    ResponseReasoningSummaryDeltaStreamingEvent, ResponseReasoningSummaryDoneStreamingEvent,
    ResponseOutputTextAnnotationAddedStreamingEvent, ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseFunctionCallArgumentsDoneStreamingEvent, ErrorStreamingEvent,
)  # fmt: skip

# Every Struct above that mirrors a schema of the same name (the sync test walks these).
_MIRRORED: Final[tuple[type[msgspec.Struct], ...]] = (
    TopLogProb, LogProb, UrlCitationBody, InputTextContent, OutputTextContent, TextContent, SummaryTextContent,
    ReasoningTextContent, RefusalContent, InputImageContent, InputFileContent, InputVideoContent, Message,
    FunctionCall, FunctionCallOutput, ReasoningBody, CompactionBody, Error, IncompleteDetails,
    InputTokensDetails, OutputTokensDetails, Usage, Reasoning, TextResponseFormat, JsonObjectResponseFormat,
    JsonSchemaResponseFormat, TextField, FunctionTool, FunctionToolChoice, AllowedToolChoice, ResponseResource,
    ErrorPayload, *EVENT_SCHEMAS,
)  # fmt: skip
SCHEMAS: Final[dict[str, type[msgspec.Struct]]] = {cls.__name__: cls for cls in _MIRRORED}

SPEC_EVENT_TYPES: Final[frozenset[str]] = frozenset(str(c.__struct_config__.tag) for c in EVENT_SCHEMAS)
SPEC_ITEM_TYPES: Final[frozenset[str]] = frozenset(
    str(c.__struct_config__.tag) for c in (Message, FunctionCall, FunctionCallOutput, ReasoningBody, CompactionBody)
)

_EventUnion = Union[EVENT_SCHEMAS]  # type: ignore[valid-type]  # noqa: UP007


def is_extension(type_name: object) -> bool:
    """True for an implementor-prefixed type (``slug:name``), which the spec leaves to its implementor."""
    return isinstance(type_name, str) and ":" in type_name


def _problem(exc: msgspec.ValidationError, prefix: str) -> str:
    # msgspec: "Expected `int`, got `str` - at `$.response.created_at`" -> "response.created_at: Expected ..."
    text = str(exc)
    message, _, where = text.rpartition(" - at `")
    if not message:
        return f"{prefix or '(root)'}: {text}"
    path = where.rstrip("`").removeprefix("$").lstrip(".")
    full = ".".join(p for p in (prefix, path) if p)
    return f"{full or '(root)'}: {message}"


def _without_extension_items(response: dict[str, Any]) -> dict[str, Any]:
    output = response.get("output")
    if isinstance(output, list) and any(isinstance(i, dict) and is_extension(i.get("type")) for i in output):
        return {**response, "output": [i for i in output if not (isinstance(i, dict) and is_extension(i.get("type")))]}
    return response


def response_problems(response: Any, path: str = "") -> list[str]:
    """What is wrong with ``response`` (a decoded JSON value) as a spec ``ResponseResource``: ``[]`` when valid,
    else one message naming the first invalid path. Extension output items are skipped."""
    if not isinstance(response, dict):
        return [f"{path or '(root)'}: Expected `object`, got `{type(response).__name__}`"]
    try:
        msgspec.convert(_without_extension_items(response), ResponseResource)
    except msgspec.ValidationError as exc:
        return [_problem(exc, path)]
    return []


def event_problems(event: Any) -> list[str]:
    """What is wrong with one decoded stream event as a spec streaming event (``[]``: valid, or an extension)."""
    if not isinstance(event, dict):
        return ["(root): Expected `object`"]
    kind = event.get("type")
    if is_extension(kind):
        return []
    if kind not in SPEC_EVENT_TYPES:
        return [f"type: {kind!r} is not one of the spec's streaming event types"]
    item = event.get("item")
    if isinstance(item, dict) and is_extension(item.get("type")):
        return []  # an extension item's added/done: the envelope is standard, the item is the implementor's
    response = event.get("response")
    if isinstance(response, dict):
        event = {**event, "response": _without_extension_items(response)}
    try:
        msgspec.convert(event, _EventUnion)
    except msgspec.ValidationError as exc:
        return [_problem(exc, "")]
    return []
