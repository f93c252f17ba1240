"""Codex CLI (the pinned ``@openai/codex``, unmodified) runs one ``codex exec`` turn through the gateway on an
Anthropic upstream: the embedded SmolLM2-135M behind llama.cpp's own ``POST /v1/messages``
(``anthropic+embedded:small``), in the test's network namespace (loopback only), with the same short instructions
and idle settings as tests/clients/test_codex.py's embedded case. Codex's default request (namespace, custom and
function tools, reasoning, text.verbosity, prompt_cache_key, store: false...) is taken whole by the Anthropic adapter
and the model's answer is what Codex prints. Needs root (``ip netns``), Codex CLI and the embedded model."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.codex_cli import embedded_turn, netns
from clients.test_codex import PORT

__all__ = ["netns"]  # (the namespace fixture, shared with the Codex client tests)

pytestmark = [pytest.mark.clients, pytest.mark.model]


@pytest.mark.timeout(900)  # wall time on a loaded machine
def test_codex_turn_through_the_anthropic_adapter(netns: str, tmp_path: Path) -> None:
    run = embedded_turn(netns, tmp_path, PORT + 60, upstream="anthropic+embedded")
    done, sent, timings = run.done, run.sent, run.timings
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert sent and all(r["path"] == "/v1/responses" for r in sent), sent
    body = sent[0]["body"]
    assert body["store"] is False and body["reasoning"] and body["text"] == {"verbosity": "low"}
    answer = timings[-1]["text"].strip()
    assert answer, timings
    assert done.stdout.strip() == answer, (done.stdout[-2000:], answer)
