"""The Chat Completions adapter's generation (slot, retries before the first token, attempts): its slot is free again
after every way it ends, retried or not, filtered or not. Against the SIMULATED FakeChatCompletionsServer."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.chat_server import Done, Drop, FakeChatCompletionsServer, Status, finish, text
from respstream.server.upstream.base import Finish, GenerationRequest, TextDelta, UpstreamError, singles
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}], max_output_tokens=50)


def make(fake: FakeChatCompletionsServer, **options: Any) -> ChatCompletionsUpstream:
    return ChatCompletionsUpstream(fake.url, name="fake", idle_timeout=5.0, retry_backoff=0.01, max_concurrency=2,
                                   **options)


def slots_free(upstream: ChatCompletionsUpstream) -> int:
    return upstream._semaphore._value


@pytest.mark.parametrize("filters", [{}, {"loop_guard": True}], ids=["plain", "answer-filters"])
async def test_slot_free_after_a_retried_generation(fake: FakeChatCompletionsServer, filters: dict[str, Any]) -> None:
    fake.script(Status(503))
    fake.script(Drop())
    fake.script(text("ok"), finish(), Done())
    upstream = make(fake, retries=2, **filters)
    try:
        stream = upstream.generate_batches(REQUEST)
        chunks = [chunk async for batch in stream for chunk in singles(batch)]
        assert [type(c) for c in chunks][-1] is Finish
        assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "ok"
        assert len(fake.requests) == 3
        assert slots_free(upstream) == 2
    finally:
        await upstream.aclose()


async def test_slot_free_when_retries_run_out(fake: FakeChatCompletionsServer) -> None:
    fake.script(Status(500))
    fake.script(Status(502))
    upstream = make(fake, retries=1)
    try:
        with pytest.raises(UpstreamError) as info:
            async for _ in upstream.generate_batches(REQUEST):
                pass
        assert (info.value.status, info.value.before_first_token) == (502, True)
        assert len(fake.requests) == 2
        assert slots_free(upstream) == 2
    finally:
        await upstream.aclose()


async def test_slot_free_when_closed_after_the_first_batch(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("a"), text("b"), finish(), Done())
    upstream = make(fake)
    try:
        stream = upstream.generate_batches(REQUEST)
        first = await anext(stream)
        assert slots_free(upstream) == 1, "the slot is held while the generation runs"
        assert [c.text for c in singles(first) if isinstance(c, TextDelta)][:1] == ["a"]
        await stream.aclose()
        assert slots_free(upstream) == 2
    finally:
        await upstream.aclose()


async def test_a_failure_after_the_first_batch_is_not_retried(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("Hello"), Drop())
    fake.script(text("never"), finish(), Done())
    upstream = make(fake, retries=3)
    got: list[Any] = []
    try:
        with pytest.raises(UpstreamError) as info:
            async for batch in upstream.generate_batches(REQUEST):
                got += batch
        assert info.value.before_first_token is False
        assert len(fake.requests) == 1 and got
        assert slots_free(upstream) == 2
    finally:
        await upstream.aclose()
