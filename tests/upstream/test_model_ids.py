"""Readable model ids: llama.cpp reports its GGUF path as the model id; the gateway lists a short name instead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text
from respstream.server.routing.router import ModelNotFound, Router
from respstream.server.upstream.base import GenerationRequest, TextDelta
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.embedded.adapter import EMBEDDED_MODEL_ID, EmbeddedUpstream
from respstream.server.upstream.model_ids import alias_models, looks_like_path, readable_model_id

GGUF = "/models/cache/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize(
    ("raw", "readable"),
    [
        (GGUF, "SmolLM2-135M-Instruct.Q4_1"),
        ("./qwen2.5-0.5b-instruct-q8_0.gguf", "qwen2.5-0.5b-instruct-q8_0"),
        ("C:\\models\\Phi-3.GGUF", "Phi-3"),
        ("~/models/llama", "llama"),
        ("model.gguf", "model"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),  # a hub name, not a path
        ("/", "/"),
    ],
)
def test_readable_model_id(raw: str, readable: str) -> None:
    assert readable_model_id(raw) == readable
    assert looks_like_path(raw) is (raw != readable or raw == "/")


def test_alias_models_keeps_the_way_back_and_unique_names() -> None:
    aliases = alias_models(["/a/m.gguf", "/b/m.gguf", "m-2", "gpt-4o", "/a/m.gguf"])
    assert aliases == {"m": "/a/m.gguf", "m-3": "/b/m.gguf", "m-2": "m-2", "gpt-4o": "gpt-4o"}


@pytest.fixture(scope="module")
def llamacpp_like() -> Iterator[FakeChatCompletionsServer]:
    # SIMULATED: the fake server reporting a path-shaped model id, as llama.cpp does.
    with FakeChatCompletionsServer(models=[GGUF, "other-model"]) as server:
        yield server


async def test_discovered_path_id_is_listed_readable_and_sent_as_reported(
    llamacpp_like: FakeChatCompletionsServer,
) -> None:
    llamacpp_like.reset()
    llamacpp_like.script(text("hi"), finish(), Done())
    upstream = ChatCompletionsUpstream(llamacpp_like.url, name="llama")
    try:
        await upstream.start()
        assert upstream.models == ["SmolLM2-135M-Instruct.Q4_1", "other-model"]
        assert await upstream.list_models() == [GGUF, "other-model"]  # the upstream's own view is unchanged
        request = GenerationRequest(model="SmolLM2-135M-Instruct.Q4_1", messages=[{"role": "user", "content": "x"}])
        chunks = [c async for c in upstream.generate(request)]
    finally:
        await upstream.aclose()
    assert TextDelta("hi") in chunks
    assert llamacpp_like.requests[-1]["model"] == GGUF


async def test_router_lists_readable_names_in_model_not_found(llamacpp_like: FakeChatCompletionsServer) -> None:
    upstream = ChatCompletionsUpstream(llamacpp_like.url, name="llama", models=[GGUF])
    router = Router([upstream])
    assert router.models() == ["SmolLM2-135M-Instruct.Q4_1"]
    with pytest.raises(ModelNotFound) as info:
        await router.route("hello", pinned_model="nope")
    assert info.value.available == ["SmolLM2-135M-Instruct.Q4_1"] and "/models/" not in str(info.value)
    assert upstream.upstream_model_id("SmolLM2-135M-Instruct.Q4_1") == GGUF
    assert upstream.upstream_model_id("unknown") == "unknown"


def test_embedded_ids() -> None:
    # The packaged models are named by their GGUF metadata; the small one also answers to its published name.
    assert EmbeddedUpstream().models == ["qwen2.5-coder-1.5b-instruct"]
    assert EMBEDDED_MODEL_ID in EmbeddedUpstream(model_size="small").models
    assert EmbeddedUpstream(model_path="/opt/models/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf").models == [
        "Qwen2.5-0.5B-Instruct-Q4_K_M"
    ]
    assert EmbeddedUpstream(models=["mine"], model_path="/x/y.gguf").models == ["mine"]
