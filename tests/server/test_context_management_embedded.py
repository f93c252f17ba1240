"""``context_management`` on the real embedded model (SmolLM2-135M-Instruct through llama.cpp): the context is
counted by the model's own tokenizer, the summary is the model's, and the answer is generated from it. Structure is
asserted, not words."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.inputs.compaction_item import decode_compaction
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .helpers import ServerThread

pytestmark = pytest.mark.model

if not EmbeddedUpstream.available("small"):
    pytest.skip("embedded model not installed (run `make install-model`)", allow_module_level=True)

NOTES = " ".join(f"Bed {i} has red roses." for i in range(200))  # about 1,400 tokens for this tokenizer


@pytest.fixture(scope="module")
def gateway() -> Iterator[httpx.Client]:
    upstream = EmbeddedUpstream(model_size="small", n_parallel=1, n_ctx=4096)
    app = create_app(Config(dialect="openai", upstreams=["embedded"]), Components(upstreams=[upstream]))
    with ServerThread(app, start_timeout=120) as srv, httpx.Client(base_url=srv.url, timeout=300) as client:
        yield client


def test_the_embedded_model_compacts_past_the_threshold_and_answers(gateway: httpx.Client) -> None:
    history = [{"role": "user", "content": f"My garden notes: {NOTES}"},
               {"role": "assistant", "content": "Noted."},
               {"role": "user", "content": "Name one flower in my garden."}]
    counted = gateway.post("/v1/responses/input_tokens", json={"input": history}).json()["input_tokens"]
    assert counted > 1000, counted  # the model's tokenizer says the context is past the threshold
    answer = gateway.post("/v1/responses", json={
        "input": history, "stream": False, "max_output_tokens": 24, "temperature": 0,
        "context_management": [{"type": "compaction", "compact_threshold": 1000}]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] in ("completed", "incomplete"), body.get("error")
    assert [i["type"] for i in body["output"]] == ["compaction", "message"], body
    assert decode_compaction(body["output"][0]["encrypted_content"]).strip(), body
    after = gateway.post("/v1/responses/input_tokens", json={"input": "And another?",
                                                               "previous_response_id": body["id"]}).json()
    assert after["input_tokens"] < counted, json.dumps(after)
