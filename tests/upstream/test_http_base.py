"""The HTTP families over the core's base class (issue 39, "Layout"): every HTTP adapter is an ``HttpUpstream``, none
extends another family's adapter, and the factory gives each the options it takes (the base's and its own) out of
one shared options mapping, ignoring the rest. No network: nothing here is started."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.factory import build_upstream
from respstream.server.upstream.gemini import GeminiUpstream
from respstream.server.upstream.http.upstream import HttpUpstream
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream

HTTP_FAMILIES = (ChatCompletionsUpstream, ResponsesNativeUpstream, AnthropicUpstream, GeminiUpstream)

# One options mapping for every upstream, as the config file gives it: transport options of the HTTP base, options of
# the Chat Completions API only, and options of one provider only.
SHARED: dict[str, Any] = {
    "idle_timeout": 7.0,
    "max_concurrency": 3,
    "retries": 1,
    "deadline": 42.0,
    "extra_body": {"repeat_penalty": 1.1},
    "loop_guard": True,
    "include_usage": False,
    "max_retry_wait": 2.5,
    "anthropic_version": "2099-01-01",
    "probe_timeout": 1.5,
}


@pytest.mark.parametrize("family", HTTP_FAMILIES, ids=lambda cls: cls.__name__)
def test_every_http_family_extends_the_core_base_and_no_other_family(family: type[HttpUpstream]) -> None:
    assert issubclass(family, HttpUpstream)
    others = [other.__name__ for other in HTTP_FAMILIES if other is not family and issubclass(family, other)]
    assert not others, f"{family.__name__} extends {others}"


@pytest.mark.parametrize(("spec", "family"), [
    ("chat+http://127.0.0.1:1/v1", ChatCompletionsUpstream),
    ("responses+http://127.0.0.1:1/v1", ResponsesNativeUpstream),
    ("anthropic+http://127.0.0.1:1", AnthropicUpstream),
    ("gemini+http://127.0.0.1:1", GeminiUpstream),
])
def test_the_factory_gives_every_http_family_the_base_options(spec: str, family: type[HttpUpstream]) -> None:
    upstream = build_upstream(spec, **SHARED)
    assert type(upstream) is family
    assert isinstance(upstream, HttpUpstream)
    assert (upstream.idle_timeout, upstream.max_concurrency, upstream.retries, upstream.deadline) == (7.0, 3, 1, 42.0)


def test_chat_api_options_reach_the_adapters_that_speak_chat_completions() -> None:
    chat = build_upstream("chat+http://127.0.0.1:1/v1", **SHARED)
    native = build_upstream("http://127.0.0.1:1/v1", **SHARED)  # (api=auto: Chat Completions until probed)
    assert isinstance(chat, ChatCompletionsUpstream) and isinstance(native, ResponsesNativeUpstream)
    for upstream in (chat, native):
        api = upstream.chat_api
        assert (api.extra_body, api.loop_guard, api.include_usage, api.text_tool_calls) == (
            {"repeat_penalty": 1.1}, True, False, False)
    assert native.probe_timeout == 1.5 and native.api_mode == "auto"


def test_provider_options_reach_their_provider_only() -> None:
    anthropic = build_upstream("anthropic+http://127.0.0.1:1", **SHARED)
    gemini = build_upstream("gemini+http://127.0.0.1:1", **SHARED)
    assert isinstance(anthropic, AnthropicUpstream) and isinstance(gemini, GeminiUpstream)
    assert anthropic._headers["anthropic-version"] == "2099-01-01"
    assert gemini.max_retry_wait == 2.5 and "anthropic-version" not in gemini._headers
    assert not hasattr(anthropic, "chat_api") and not hasattr(gemini, "chat_api")


@pytest.mark.parametrize(("spec", "header", "value"), [
    ("chat+http://127.0.0.1:1/v1", "authorization", "Bearer k-1"),
    ("responses+http://127.0.0.1:1/v1", "authorization", "Bearer k-1"),
    ("anthropic+http://127.0.0.1:1", "x-api-key", "k-1"),
    ("gemini+http://127.0.0.1:1", "x-goog-api-key", "k-1"),
])
def test_each_family_sends_its_key_in_its_own_header_only(spec: str, header: str, value: str) -> None:
    upstream = build_upstream(spec, api_key="k-1", headers={"x-tenant": "t1"})
    assert isinstance(upstream, HttpUpstream)
    keyed = {name: v for name, v in upstream._headers.items() if "k-1" in v}
    assert keyed == {header: value}
    assert upstream._headers["x-tenant"] == "t1" and "k-1" not in repr(upstream)


def test_a_chat_only_option_is_refused_by_a_provider_adapter_built_directly() -> None:
    # (the factory leaves such options out; a direct call naming one is a mistake and says so)
    with pytest.raises(TypeError, match="loop_guard"):
        AnthropicUpstream("http://127.0.0.1:1", name="a", loop_guard=True)
    with pytest.raises(ValueError, match="max_concurrency"):
        GeminiUpstream("http://127.0.0.1:1", name="g", max_concurrency=0)


class _RecordingServer:
    """A SIMULATED HTTP server on loopback that records each request line and answers 404."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.lines.append(head.split(b"\r\n", 1)[0].decode())
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])


@pytest.mark.parametrize(("constrained", "asked"), [(True, False), (False, True)])
def test_anthropic_token_counts_ask_llamacpp_only_on_the_embedded_server(constrained: bool, asked: bool) -> None:
    # A real Anthropic host has no /apply-template: the prompt must not be posted to a path of it that is not the
    # API's. anthropic+embedded (constrained=False) is llama.cpp, whose tokenizer counts exactly.
    async def run() -> tuple[int | None, list[str]]:
        server = _RecordingServer()
        port = await server.start()
        upstream = AnthropicUpstream(f"http://127.0.0.1:{port}", name="claude", api_key="k", constrained=constrained)
        try:
            count = await upstream.count_tokens([{"role": "user", "content": "hello"}])
        finally:
            await upstream.aclose()
            server.server.close()
        return count, server.lines

    count, lines = asyncio.run(run())
    assert count is None  # (the embedded case: the SIMULATED server answers 404, so the caller estimates too)
    assert bool(lines) is asked, lines
    assert all("/apply-template" in line for line in lines)
