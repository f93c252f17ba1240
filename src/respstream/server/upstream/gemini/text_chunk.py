"""The typed shapes of a Gemini chunk that is only answer text (the bulk of a stream), and of its ``usageMetadata``.

Why typed: msgspec builds and checks only what a struct declares, and refuses anything else (a finish, a thought, a
call, an unknown field): a chunk these decode is one the full path (a plain JSON decode fed to
:meth:`~.stream.GeminiStream.feed`) reads as bare text parts, and the lanes of gemini/reads.py and
gemini/text_template.py give exactly what that path gives (tests/providers/gemini/test_lanes.py).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["TextChunk", "UsageCounts", "decode_text_chunk", "usage_counts"]


class _TextPart(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    text: str


class _TextContent(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    parts: list[_TextPart]
    role: str = "model"


class _TextCandidate(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    content: _TextContent
    index: int = 0


class _ModalityCount(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    modality: str = ""
    tokenCount: int = 0


class UsageCounts(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``usageMetadata`` as Gemini writes it, every value typed and checked (unknown fields refused: a skipped value
    is not checked): a usage this takes is one the full decoder takes (text_template.py checks a tail's usage so)."""

    promptTokenCount: int = 0
    candidatesTokenCount: int = 0
    totalTokenCount: int = 0
    thoughtsTokenCount: int = 0
    cachedContentTokenCount: int = 0
    toolUsePromptTokenCount: int = 0
    promptTokensDetails: list[_ModalityCount] | None = None
    candidatesTokensDetails: list[_ModalityCount] | None = None
    cacheTokensDetails: list[_ModalityCount] | None = None
    toolUsePromptTokensDetails: list[_ModalityCount] | None = None
    trafficType: str | None = None


class TextChunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A chunk of answer text only; any other field (a finish, a thought, a call, an error) refuses it."""

    candidates: list[_TextCandidate]
    # Decoded, never skipped as msgspec.Raw: skipping a value checks neither its UTF-8 nor its numbers' range, and
    # this lane must refuse exactly what the full decoder refuses (tests/providers/gemini/test_lanes.py). The usage
    # typed (cheaper than a dict; a usage it refuses, a count that is a float or a boolean, goes the full way).
    usageMetadata: UsageCounts | None = None
    modelVersion: Any = None  # (named so the struct takes chunks that carry them; not used)
    responseId: Any = None


decode_text_chunk = msgspec.json.Decoder(TextChunk).decode


def usage_counts(usage: UsageCounts) -> dict[str, Any]:
    """The counts :func:`~.stream._usage` reads, as the full path's ``usageMetadata`` dict gives them (an absent
    count and a 0 both count 0)."""
    return {"promptTokenCount": usage.promptTokenCount, "candidatesTokenCount": usage.candidatesTokenCount,
            "thoughtsTokenCount": usage.thoughtsTokenCount, "cachedContentTokenCount": usage.cachedContentTokenCount}
