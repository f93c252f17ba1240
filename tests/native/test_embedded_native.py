"""The repair proxy on a real peer: the gateway in front of llama.cpp's own ``/v1/responses`` (SmolLM2-135M through
``xllamacpp``, the embedded model started as an upstream). llama.cpp sends no sequence numbers and no indices and
has no background mode, resume or cancel (tests/conformance/test_live_model.py pins that down); through the gateway
``check --url`` passes every scenario with zero violations in each dialect, and the record says what was repaired.
Needs the embedded model (``make install-model``)."""

from __future__ import annotations

import asyncio
import io
import json
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.conformance import run
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

pytestmark = [pytest.mark.model, pytest.mark.slow]

SCENARIOS = "plain,long_answer,background_resume,cancel,bad_request,unknown_model"


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    if not EmbeddedUpstream.available():
        pytest.skip("the embedded model is not installed (make install-model)")
    upstream = EmbeddedUpstream(model_size="small", n_parallel=2)  # the fast model: this checks the wire
    asyncio.run(upstream.start())
    assert upstream.address is not None
    yield f"{upstream.address}/v1"
    asyncio.run(upstream.aclose())


def check(url: str, dialect: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    args = types.SimpleNamespace(url=url, json=True, dialect=dialect, starting_after=None, timeout=120,
                                 scenario=SCENARIOS)
    code = run(args, stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize("dialect", ["openai", "platform"])
def test_gateway_repairs_llama_cpp_responses(llama: str, dialect: str) -> None:
    config = Config(dialect=dialect, upstreams=[f"responses+{llama}"])
    with ServerThread(create_app(config), start_timeout=60) as gateway:
        code, report = check(gateway.base_url, dialect)
        listed = httpx.get(f"{gateway.base_url}/models", timeout=10).json()["data"]
        model = next(m["id"] for m in listed if m["id"] != "auto")  # the id llama.cpp reports (GGUF metadata)
        body = {"model": model, "input": "Say hello.", "max_output_tokens": 8, "stream": False}
        answer = httpx.post(f"{gateway.base_url}/responses", json=body, timeout=60).json()
        assert "id" in answer, answer
        stored = httpx.get(f"{gateway.base_url}/responses/{answer['id']}", timeout=10).json()
        metrics = httpx.get(f"{gateway.url}/metrics", timeout=10).text
    results = {s["name"]: (s["result"], s["detail"]) for s in report["scenarios"]}
    assert {name: r for name, (r, _) in results.items()} == dict.fromkeys(SCENARIOS.split(","), "passed"), results
    assert all(s["violations"] == [] for s in report["scenarios"])
    assert code == 0
    # llama.cpp's own stream had no sequence numbers and no indices: that is what the gateway repaired.
    assert stored["respstream:repairs"]["sequence.missing"] == 1
    assert stored["respstream:repairs"]["envelope.missing_field"] >= 1
    assert 'respstream_upstream_repairs_total{code="sequence.missing"}' in metrics


def test_a_plain_url_is_probed_and_found_to_speak_responses(llama: str) -> None:
    from respstream.server.upstream.factory import build_upstream
    from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream

    upstream = build_upstream(llama)
    assert isinstance(upstream, ResponsesNativeUpstream) and upstream.api_mode == "auto"

    async def probe() -> str:
        try:
            await upstream.start()  # type: ignore[attr-defined]
            return upstream.api_mode
        finally:
            await upstream.aclose()

    assert asyncio.run(probe()) == "responses"
