"""What an upstream samples with when a request leaves a value out: :class:`SamplingDefaults`.

An upstream may declare ``sampling_defaults`` (the embedded llama.cpp model: 0.8 and 0.95); the Response object
echoes them for the values a request did not give (:mod:`~respstream.server.events.response_object`). Here, below
the writer, so an upstream can declare its own without importing the layer that builds Responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OPENAI_SAMPLING_DEFAULTS", "SamplingDefaults", "sampling_defaults_of"]


@dataclass(frozen=True, slots=True)
class SamplingDefaults:
    """What an upstream samples with when a request leaves a value out."""

    temperature: float = 1.0
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


# OpenAI's documented defaults (temperature 1, top_p 1, no penalties): what an OpenAI-compatible upstream that
# declares nothing else is taken to use.
OPENAI_SAMPLING_DEFAULTS = SamplingDefaults()


def sampling_defaults_of(upstream: Any) -> SamplingDefaults:
    """The ``sampling_defaults`` an upstream declares, else OpenAI's."""
    found = getattr(upstream, "sampling_defaults", None)
    return found if isinstance(found, SamplingDefaults) else OPENAI_SAMPLING_DEFAULTS
