"""The real model path: the gateway with its embedded upstream (SmolLM2-135M-Instruct through llama.cpp, xllamacpp)
and the real router, tools and rewriter, streamed over loopback HTTP. Structure is asserted, not words."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream, embedded_model_id

from .helpers import ServerThread, decode, post_stream

pytestmark = pytest.mark.model

if not EmbeddedUpstream.available("small"):
    pytest.skip("embedded model not installed (run `make install-model`)", allow_module_level=True)


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    upstream = EmbeddedUpstream(model_size="small", n_parallel=2, n_ctx=2048)
    app = create_app(Config(upstreams=["embedded"]), Components(upstreams=[upstream]))
    with ServerThread(app, start_timeout=120) as srv:
        yield srv.url


def test_real_answer_streams_through_the_gateway(gateway: str) -> None:
    d = post_stream(gateway, {"input": "Name one colour of the sky.", "max_output_tokens": 16, "temperature": 0},
                    dialect="platform")
    assert d.status_code == 200 and d.headers["content-type"].startswith("text/event-stream")
    assert d.violations == [], d.violations
    result = d.core.result
    assert result.status in ("completed", "incomplete"), result.error
    assert result.output_text.strip()
    assert result.usage is not None and 0 < result.usage["output_tokens"] <= 16
    # The id comes from the GGUF metadata (general.basename/size_label/finetune), first in the upstream's list.
    assert result.model == embedded_model_id("small")
    types = d.types
    assert types[0] == "response.created" and types[1] == "response.routing.completed"
    assert types.count("response.output_text.delta") >= 2  # streamed token by token, not in one piece


def test_real_answer_as_background_then_replayed(gateway: str) -> None:
    with httpx.Client(timeout=60) as c:
        body = {"input": "Say hello.", "model": "smollm2-135m-instruct", "max_output_tokens": 8,
                "background": True, "stream": True}
        live = c.post(f"{gateway}/v1/responses", json=body)
        rid = live.headers["x-response-id"]
        replay = c.get(f"{gateway}/v1/responses/{rid}", params={"stream": "true"})
    first, second = decode(live.content, dialect="platform"), decode(replay.content, dialect="platform")
    assert first.violations == [] and second.violations == []
    assert live.content == replay.content  # the log is the stream
    assert first.result.output_text.strip() and first.result.status in ("completed", "incomplete")


def test_input_tokens_are_counted_by_the_models_tokenizer(gateway: str) -> None:
    """The count equals the prompt tokens llama.cpp reports when it generates from the same input (pinned model,
    no tools, so the gateway adds nothing to the prompt)."""
    body = {"input": "Name one colour of the sky.", "model": "smollm2-135m-instruct", "instructions": "Be brief.",
            "tool_choice": "none"}
    with httpx.Client(timeout=60) as c:
        counted = c.post(f"{gateway}/v1/responses/input_tokens", json=body).json()
        ran = c.post(f"{gateway}/v1/responses", json={**body, "stream": False, "max_output_tokens": 4}).json()
    assert counted["object"] == "response.input_tokens" and counted["estimated"] is False
    assert counted["input_tokens"] == ran["usage"]["input_tokens"] > 5
