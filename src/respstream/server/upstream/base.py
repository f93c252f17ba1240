"""What a model backend gives the pipeline: a stream of small, typed generation chunks.

How this works: every backend (an OpenAI-compatible Chat Completions server, the embedded llama.cpp model, the
in-process scripted backend) is an :class:`Upstream`. ``generate()`` yields :data:`Chunk` values in order; the
pipeline turns them into Responses events through the writer. Backends never see sequence numbers, items or SSE.

Failures are raised as :class:`UpstreamError` with a stable ``code`` (``upstream_timeout``, ``upstream_error``,
``rate_limited``, ``upstream_unavailable``); ``before_first_token`` tells the router whether failing over to another
upstream is still safe (nothing was shown to the client yet).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from respstream.server.upstream.cache_hints import CacheHints

__all__ = [
    "Chunk",
    "Finish",
    "GenerationRequest",
    "PassedItemAdded",
    "PassedItemDone",
    "PassedItemEvent",
    "ReadSink",
    "ReasoningDelta",
    "RefusalDelta",
    "TextDelta",
    "TextRun",
    "ToolCallDelta",
    "Upstream",
    "UpstreamError",
    "Usage",
    "singles",
]


class TextDelta(msgspec.Struct, frozen=True, gc=False):
    """Answer text. ``logprobs``: the upstream's token log probabilities for it (Chat Completions
    ``choices[0].logprobs.content``, the spec's ``LogProb`` shape), only when the request asked for them."""

    text: str
    logprobs: list[Any] | None = None


class TextRun(msgspec.Struct, frozen=True, gc=False):
    """Answer text deltas one upstream read held in a row (no logprobs, none empty): what ``[TextDelta(t) for t in
    texts]`` says, as one object. Only in the batches of ``generate_batches`` (a stream's plain-text middle, read
    through its chunk template); ``generate`` yields them as single :class:`TextDelta` (see :func:`singles`)."""

    texts: list[str]


class ReasoningDelta(msgspec.Struct, frozen=True, gc=False):
    """Reasoning text: ``reasoning_content`` from the upstream, or ``<think>`` content split out of the text."""

    text: str


class RefusalDelta(msgspec.Struct, frozen=True, gc=False):
    text: str


class ToolCallDelta(msgspec.Struct, frozen=True, gc=False):
    """A fragment of one tool call. ``index`` identifies the call; ``call_id``/``name`` come with the first one."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


class Usage(msgspec.Struct, frozen=True, gc=False):
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0


class Finish(msgspec.Struct, frozen=True, gc=False):
    """The last chunk. ``reason``: ``stop`` | ``length`` | ``tool_calls`` | ``content_filter``.

    ``text``: the upstream's own final answer text when it differs from the text deltas it streamed (a native
    Responses upstream whose ``*.done`` or terminal corrected them); the pipeline closes the message with it, announced
    like a rewrite. ``repairs``: what the gateway repaired in the upstream's stream (violation code -> count); ``None``
    for backends that do not stream Responses events (nothing to repair), ``{}`` for a clean native stream.
    """

    reason: str = "stop"
    usage: Usage | None = None
    text: str | None = None
    repairs: dict[str, int] | None = None


class PassedItemAdded(msgspec.Struct, frozen=True, gc=False):
    """An output item of a native Responses upstream that the gateway passes through as it came (a hosted tool's
    call such as ``web_search_call``, ``reasoning``...; see upstream/responses/passed_items.py): it opens. ``key`` names
    it in the chunks that follow; ``item`` is the upstream's item object."""

    key: int
    item: dict[str, Any]


class PassedItemEvent(msgspec.Struct, frozen=True, gc=False):
    """An event of a passed-through item, in the upstream's order: ``type`` its canonical name (OpenAI's), ``fields``
    everything but ``type``, ``sequence_number``, ``item_id`` and ``output_index`` (the writer gives its own);
    ``item_id``: whether the event carries one."""

    key: int
    type: str
    fields: dict[str, Any]
    item_id: bool = True


class PassedItemDone(msgspec.Struct, frozen=True, gc=False):
    """A passed-through item is done; ``item`` its final object."""

    key: int
    item: dict[str, Any]


Chunk = (TextDelta | TextRun | ReasoningDelta | RefusalDelta | ToolCallDelta | PassedItemAdded | PassedItemEvent
         | PassedItemDone | Finish)


def singles(batch: list[Chunk]) -> Iterator[Chunk]:
    """The chunks of a batch one by one, a :class:`TextRun` as its :class:`TextDelta` each (what ``generate`` and
    chunk-by-chunk consumers see)."""
    for chunk in batch:
        if chunk.__class__ is TextRun:
            for text in chunk.texts:  # type: ignore[union-attr]
                yield TextDelta(text)
        else:
            yield chunk


ReadSink = Callable[[list[Chunk]], bool]
"""Offered the batch of one upstream read right from the connection's data callback, while the consumer of
``generate_batches`` waits for its next batch (never a batch that ends the stream or precedes an error): True when
it applied the batch (the consumer's own choice: plain text, say), False to have it yielded as usual. Raising is as
if the consumer raised there."""


@dataclass(slots=True)
class GenerationRequest:
    """Chat Completions style input, already built by the pipeline from the Responses request."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)  # Chat Completions `tools` shape
    tool_choice: Any = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    # Further Chat Completions body fields, already in their Chat Completions names and shapes (top_p,
    # response_format, reasoning_effort, logprobs...; see server/responses/chat_request.py). Backends that are not
    # Chat Completions read the ones they implement.
    options: dict[str, Any] = field(default_factory=dict)
    # What the request asked of prompt caching (upstream/cache_hints.py); breakpoints are on the messages
    cache: CacheHints = field(default_factory=CacheHints)


class UpstreamError(Exception):
    """A backend failed. ``code`` is stable (see the module docstring); ``retry_after`` (seconds) is kept from a 429."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        before_first_token: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.before_first_token = before_first_token
        self.retry_after = retry_after
        # What the gateway repaired in the upstream's stream before it failed (native Responses upstreams).
        self.repairs: dict[str, int] | None = None

    def __repr__(self) -> str:
        return f"UpstreamError({self.code!r}, {self.message!r}, before_first_token={self.before_first_token})"


class Upstream(Protocol):
    """A model backend. ``name`` is how config and the router refer to it; ``models`` what it serves.

    Optional: ``generate_batches(request)``, the same chunks as ``generate`` as non-empty lists, one per read of
    the upstream (only what is already there; never waiting to fill one). The pipeline prefers it: a round then pays
    its per-step costs once per read (``server/responses/round_collector.py``). The Chat Completions adapter has it, and
    takes ``generate_batches(request, sink=...)`` too (its ``takes_read_sink`` is True): reads of plain text then go
    to the :data:`ReadSink` without waking the consumer.
    """

    name: str
    models: list[str]

    def generate(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        """Stream chunks, ending with exactly one :class:`Finish`. Raises :class:`UpstreamError`.

        Closing the iterator early (client went away) must release the upstream connection.
        """
        ...

    async def aclose(self) -> None: ...
