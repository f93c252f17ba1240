"""Outbound clients share one TLS context: the CA bundle is loaded once per process, not once per client.

Loading it costs ~190M instructions (tens of milliseconds on the event loop); httpx loads it for every
``AsyncClient`` it is not handed a context for, and the health probe made one for each context discovery (#16)."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from fakes.chat_server import FakeChatCompletionsServer
from respstream.server.tls import client_tls_context
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.context_discovery import discover_context
from respstream.server.upstream.http.stream import LeanHTTP


async def test_discovery_and_token_counting_load_the_ca_bundle_at_most_once(
        fake: FakeChatCompletionsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(args or kwargs)
        return real(*args, **kwargs)

    client_tls_context.cache_clear()
    monkeypatch.setattr(ssl, "create_default_context", counting)
    upstream = ChatCompletionsUpstream(fake.url, name="fake", models=["fake-model"])
    try:
        for _ in range(3):
            await discover_context(upstream)
        await upstream.count_tokens([{"role": "user", "content": "hi"}])
    finally:
        await upstream.aclose()
    assert len(made) == 1  # the shared context, made on first use; never one per client
    assert LeanHTTP(connect_timeout=1, idle_timeout=1)._ssl_context() is client_tls_context()
