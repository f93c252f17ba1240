"""``check --url`` against a real peer: llama.cpp's own ``/v1/responses`` (SmolLM2-135M via ``xllamacpp``), and our
gateway in front of the same llama.cpp server. Needs the embedded model (``make install-model``).

Facts these pin down (spec/peer-facts.md): llama.cpp sends no ``sequence_number`` and leaves ``output_index`` /
``content_index`` out; it has no background mode or resume (404) and accepts any model name. The gateway in front of
it must turn the same tokens into a stream with no violations.
"""

from __future__ import annotations

import asyncio
import io
import json
import types
from collections.abc import Iterator
from typing import Any

import pytest

from respstream.conformance import run
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .live_servers import ServerThread

pytestmark = [pytest.mark.model, pytest.mark.slow]

QUICK = "plain,background_resume,bad_request,unknown_model"


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    if not EmbeddedUpstream.available("small"):
        pytest.skip("the embedded model is not installed (make install-model)")
    upstream = EmbeddedUpstream(model_size="small", n_parallel=2)
    asyncio.run(upstream.start())
    assert upstream.address is not None
    yield f"{upstream.address}/v1"
    asyncio.run(upstream.aclose())


def check(url: str, dialect: str, scenarios: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    args = types.SimpleNamespace(url=url, json=True, dialect=dialect, starting_after=None, timeout=120,
                                 scenario=scenarios)
    code = run(args, stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


def test_llama_cpp_own_responses_endpoint(llama: str) -> None:
    code, report = check(llama, "openai", QUICK)
    by_name = {s["name"]: s for s in report["scenarios"]}
    assert code == 1  # plain has violations
    assert by_name["plain"]["result"] == "violations"
    codes = {v["code"] for v in by_name["plain"]["violations"]}
    assert {"sequence.missing", "envelope.missing_field"} <= codes
    assert by_name["background_resume"]["result"] == "unsupported", by_name["background_resume"]
    assert by_name["bad_request"]["result"] == "passed"
    assert by_name["unknown_model"]["result"] == "unsupported"


@pytest.mark.parametrize("dialect", ["openai", "platform"])
def test_gateway_in_front_of_llama_cpp(llama: str, dialect: str) -> None:
    from respstream.server.config import Config
    from respstream.server.http.app import create_app

    with ServerThread(create_app(Config(dialect=dialect, upstreams=[llama]))) as gateway:
        code, report = check(gateway.base_url, dialect, "plain,cancel,bad_request,unknown_model")
    not_passed = {s["name"]: s["detail"] for s in report["scenarios"] if s["result"] != "passed"}
    assert not_passed == {}
    assert all(s["violations"] == [] for s in report["scenarios"])
    assert code == 0
