"""``deadline_from_first_token`` (the embedded model's): the generation deadline does not count the prompt read, only
the generation after the first token; the idle timer still ends a server that sends nothing. Against the SIMULATED
FakeChatCompletionsServer, shaped like llama.cpp: a role-only chunk with ``prompt_progress`` at once, then ``:``
comment lines while it reads the prompt, then the tokens."""

from __future__ import annotations

import pytest

from fakes.chat_server import Chunk, Done, FakeChatCompletionsServer, Raw, Sleep, Stall, Step, finish, text
from respstream.server.upstream.base import TextDelta
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream

from .test_chat_completions import collect, failure, make

# llama.cpp's first chunk of a streamed chat completion with return_progress (no token yet).
_PROGRESS = Chunk({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}],
                   "prompt_progress": {"total": 6000, "cache": 0, "processed": 0, "time_ms": 0}})


def _slow_prompt(seconds: float) -> list[Step]:
    """A prompt read of ``seconds``, a ``:`` heartbeat every 0.1 s (idle timer 0.5 s: never reached)."""
    return [_PROGRESS] + [step for _ in range(round(seconds / 0.1)) for step in (Sleep(0.1), Raw(b":\n\n"))]


def upstream(fake: FakeChatCompletionsServer, from_first_token: bool) -> ChatCompletionsUpstream:
    return make(fake, deadline=0.4, idle_timeout=0.5, retries=0, deadline_from_first_token=from_first_token)


async def test_a_prompt_read_longer_than_the_deadline_completes(fake: FakeChatCompletionsServer) -> None:
    fake.script(*_slow_prompt(1.0), text("Hel"), text("lo"), finish(), Done())
    got = await collect(upstream(fake, from_first_token=True))
    assert [c for c in got if isinstance(c, TextDelta)] == [TextDelta("Hel"), TextDelta("lo")]


async def test_without_it_the_same_read_ends_at_the_deadline(fake: FakeChatCompletionsServer) -> None:
    fake.script(*_slow_prompt(1.0), text("Hel"), text("lo"), finish(), Done())
    error, got = await failure(upstream(fake, from_first_token=False))
    assert [c for c in got if isinstance(c, TextDelta)] == []
    assert (error.code, error.before_first_token) == ("upstream_timeout", True) and "deadline" in error.message


async def test_the_deadline_still_ends_a_long_generation(fake: FakeChatCompletionsServer) -> None:
    steps: list[Step] = _slow_prompt(0.6)
    for i in range(20):
        steps += [text(f"w{i} "), Sleep(0.05)]
    fake.script(*steps, finish(), Done())
    error, got = await failure(upstream(fake, from_first_token=True))
    assert 2 <= len([c for c in got if isinstance(c, TextDelta)]) < 20  # ~0.4 s of the 1 s of tokens
    assert (error.code, error.before_first_token) == ("upstream_timeout", False) and "deadline" in error.message


@pytest.mark.parametrize("from_first_token", [True, False])
async def test_a_silent_server_still_ends_at_the_idle_timeout(fake: FakeChatCompletionsServer,
                                                              from_first_token: bool) -> None:
    fake.script(_PROGRESS, Stall())
    error, got = await failure(make(fake, deadline=30, idle_timeout=0.3, retries=0,
                                    deadline_from_first_token=from_first_token))
    assert got == [] and (error.code, error.before_first_token) == ("upstream_timeout", True)
    assert "idle" in error.message
