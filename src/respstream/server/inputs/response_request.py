"""The typed ``POST /v1/responses`` request: :class:`ResponseRequest` and its normalised :class:`InputItem` list.

Made by :func:`~respstream.server.inputs.requests.parse_request`; read by every layer above (context, pipeline,
the Response object's echo).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from respstream.server.events.client_tool_kinds import ClientTool
from respstream.server.inputs.context_management import CompactionPolicy
from respstream.server.inputs.request_fields import RequestFields
from respstream.server.inputs.tool_policy import ToolPolicy
from respstream.server.tools.mcp_tools import McpServerSpec

__all__ = ["InputItem", "ResponseRequest"]


@dataclass(slots=True)
class InputItem:
    """One normalised input item: a text message, a function call, its output, or reasoning."""

    type: str  # message | function_call | function_call_output | reasoning
    role: str = "user"
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    output: str = ""
    parts: list[dict[str, Any]] | None = None  # image/file parts of a message, in Chat Completions form
    # reasoning: the provider's opaque state (Anthropic's signature or redacted data, Gemini's thoughtSignature),
    # returned to it unchanged; ``summarized``: the item had summary parts (``text`` is their text)
    encrypted_content: str | None = None
    summarized: bool = False
    # message: the last ``prompt_cache_breakpoint`` on one of its content parts, as given (validated by
    # inputs/prompt_cache.py); it marks the end of this message as the end of a cacheable prefix, for this request only
    cache_breakpoint: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.type == "message":
            part = "output_text" if self.role == "assistant" else "input_text"
            content = [{"type": part, "text": self.text}]
            content += [_responses_part(p) for p in self.parts or ()]
            return {"type": "message", "role": self.role, "content": content}
        if self.type == "function_call":
            return {"type": "function_call", "call_id": self.call_id, "name": self.name, "arguments": self.arguments}
        if self.type == "function_call_output":
            return {"type": "function_call_output", "call_id": self.call_id, "output": self.output}
        if self.encrypted_content is not None:
            summary = [{"type": "summary_text", "text": self.text}] if self.summarized else []
            return {"type": "reasoning", "summary": summary, "encrypted_content": self.encrypted_content}
        return {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": self.text}]}


def _responses_part(chat_part: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions image/file part back in its Responses input form (for stored context)."""
    if chat_part.get("type") == "image_url":
        image = chat_part.get("image_url") or {}
        return {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail", "auto")}
    return {"type": "input_file", **(chat_part.get("file") or {})}


@dataclass(slots=True)
class ResponseRequest:
    input: list[InputItem]
    model: str = "auto"
    stream: bool | None = None
    background: bool = False
    store: bool = True
    instructions: str | None = None
    client_tools: list[dict[str, Any]] = field(default_factory=list)  # flat Responses function tools (upstream)
    client_kinds: dict[str, ClientTool] = field(default_factory=dict)  # flat name -> what the client defined
    declared_tools: list[dict[str, Any]] = field(default_factory=list)  # the client's tools as sent (the echo)
    server_tools: set[str] | None = None  # None: every server tool; else the ones selected by hosted tool types
    tool_choice: Any = "auto"
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    previous_response_id: str | None = None
    conversation_id: str | None = None
    conversation_api: bool = False  # named by OpenAI's `conversation` (must exist), not the platform's id
    metadata: dict[str, str] = field(default_factory=dict)
    parallel_tool_calls: bool = True
    mcp_servers: list[McpServerSpec] = field(default_factory=list)  # {"type": "mcp"} tools
    mcp_approvals: list[dict[str, Any]] = field(default_factory=list)  # mcp_approval_response input items
    mcp_approval_requests: list[dict[str, Any]] = field(default_factory=list)  # echoed mcp_approval_request items
    options: RequestFields = field(default_factory=RequestFields)  # sampling, text.format, reasoning, include...
    tool_policy: ToolPolicy = field(default_factory=ToolPolicy)  # tool_choice as enforced
    media: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (param, Chat part) of image/file inputs
    client_metadata: dict[str, str] | None = None  # Codex's client facts: kept and echoed, never sent upstream
    generate: bool = True  # False: WebSocket prewarm (Codex's `generate: false`), no generation (pipeline.py)
    affinity: str | None = None  # session key (prompt_cache_key or session headers): server/routing/affinity.py
    ignored_fields: tuple[str, ...] = ()  # top-level fields nobody here knows (reported: inputs/field_policy.py)
    compaction: CompactionPolicy | None = None  # context_management (inputs/context_management.py)
    compaction_trigger: bool = False  # the input ended with a compaction_trigger item: compact, do not generate

    @property
    def late_fields_echo(self) -> dict[str, Any]:
        """The late-2026 fields the Response echoes when the request gave them."""
        echo = self.options.late_echo()
        if self.compaction is not None:
            echo["context_management"] = self.compaction.echo()
        return echo

    # The option fields under their request names, for the Response object's echo (server/events/response_object.py).
    @property
    def presence_penalty(self) -> float | None:
        return self.options.presence_penalty

    @property
    def frequency_penalty(self) -> float | None:
        return self.options.frequency_penalty

    @property
    def top_logprobs(self) -> int | None:
        return self.options.top_logprobs

    @property
    def max_tool_calls(self) -> int | None:
        return self.options.max_tool_calls

    @property
    def truncation(self) -> str:
        return self.options.truncation

    @property
    def safety_identifier(self) -> str | None:
        return self.options.safety_identifier

    @property
    def prompt_cache_key(self) -> str | None:
        return self.options.prompt_cache_key

    @property
    def service_tier(self) -> str | None:
        return self.options.service_tier

    @property
    def reasoning(self) -> dict[str, Any]:
        return self.options.reasoning_json()

    @property
    def text(self) -> dict[str, Any]:
        return self.options.text_json()

    @property
    def input_text(self) -> str:
        """The text the router looks at: the last user message (or all text when there is none)."""
        for item in reversed(self.input):
            if item.type == "message" and item.role == "user":
                return item.text
        return "\n".join(i.text or i.output for i in self.input)

