"""The embedded default is Codex-ready (issue #29): Codex CLI's first request (4,256 tokens, measured with the default
model) plus the default output cap fits one slot, and llama.cpp reading such a prompt on a CPU is not an idle
stall. Constructing the upstream starts nothing (no model is loaded here)."""

from __future__ import annotations

import pytest

from respstream.server.upstream.embedded.adapter import DEFAULT_MAX_OUTPUT_TOKENS, EmbeddedUpstream

CODEX_FIRST_REQUEST_TOKENS = 4256


@pytest.mark.parametrize("size", ["small", "medium", "large"])
def test_codex_first_request_fits_the_default_context(size: str) -> None:
    upstream = EmbeddedUpstream(model_size=size)
    assert upstream.context_tokens >= CODEX_FIRST_REQUEST_TOKENS + DEFAULT_MAX_OUTPUT_TOKENS
    assert upstream.context_tokens <= (8192 if size == "small" else 32768)  # within what the model was trained on


def test_reading_a_long_prompt_is_not_an_idle_timeout() -> None:
    # ~4,300 prompt tokens at a loaded 2-core box's ~30 tokens/s of prompt reading is well over a minute
    assert EmbeddedUpstream()._adapter_options["idle_timeout"] >= CODEX_FIRST_REQUEST_TOKENS / 30
