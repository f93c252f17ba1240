"""``deadline_from_first_token`` on the native Responses upstream (responses/adapter.py: the embedded model's
``responses+embedded``), read with and without the pipeline's read sink, and the generation deadline of both APIs
while a sink takes every read from the connection's data callback (server/upstream/generation_deadline.py).

Against the SIMULATED FakeChatCompletionsServer over loopback: on ``/v1/responses`` it writes a Responses stream
shaped like llama.cpp's while it reads a prompt (``response.created`` and the message's opening events at once, then
``:`` comment lines, then the deltas); on ``/v1/chat/completions`` plain text chunks. The chat path's own tests of
the option are in test_deadline_from_first_token.py."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, Raw, Sleep, Step, finish, text
from respstream.server.upstream.base import Finish, TextDelta, UpstreamError
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream

from .test_direct_reads import Sink, consume, flat, make
from .test_native_direct_reads import events


@pytest.fixture
def native_fake(responses_server: FakeChatCompletionsServer) -> FakeChatCompletionsServer:
    responses_server.reset()
    return responses_server


def native(fake: FakeChatCompletionsServer, *, from_first_token: bool, deadline: float = 0.4,
           idle_timeout: float = 0.5) -> ResponsesNativeUpstream:
    return ResponsesNativeUpstream(fake.url, name="native", models=["fake-model"], deadline=deadline,
                                   idle_timeout=idle_timeout, retries=0, deadline_from_first_token=from_first_token)


def heartbeats(seconds: float) -> list[Step]:
    """A prompt read of ``seconds``: a ``:`` comment every 0.1 s (idle timer 0.5 s: never reached)."""
    return [step for _ in range(round(seconds / 0.1)) for step in (Sleep(0.1), Raw(b":\n\n"))]


def native_script(words: list[str], *, prompt: float, gap: float) -> list[Step]:
    """The Responses stream of ``words`` after a prompt read of ``prompt`` s, a delta every ``gap`` s."""
    reads = events(words)
    steps: list[Step] = [Raw(b"".join(reads[:3])), *heartbeats(prompt)]
    for delta in reads[3 : 3 + len(words)]:
        steps += [Raw(delta), Sleep(gap)]
    return [*steps, Raw(b"".join(reads[3 + len(words) :]))]


async def run(upstream: ChatCompletionsUpstream, with_sink: bool) -> tuple[list[Any], Sink, UpstreamError | None]:
    """The chunks that came (from the sink and the consumer, in order), the sink, and the error if it failed."""
    log: list[tuple[str, list[Any]]] = []
    sink = Sink(log)
    try:
        await consume(upstream, sink if with_sink else None, log)
    except UpstreamError as exc:
        return flat(log), sink, exc
    finally:
        await upstream.aclose()
    return flat(log), sink, None


def texts(chunks: list[Any]) -> list[str]:
    return [c.text for c in chunks if isinstance(c, TextDelta)]


@pytest.mark.parametrize("with_sink", [False, True], ids=["consumer", "sink"])
async def test_a_prompt_read_longer_than_the_deadline_completes(native_fake: FakeChatCompletionsServer,
                                                                with_sink: bool) -> None:
    native_fake.script(*native_script(["Hel", "lo"], prompt=1.0, gap=0.01))
    got, _, error = await run(native(native_fake, from_first_token=True), with_sink)
    assert error is None
    assert texts(got) == ["Hel", "lo"] and isinstance(got[-1], Finish)


async def test_without_it_the_same_read_ends_at_the_deadline(native_fake: FakeChatCompletionsServer) -> None:
    native_fake.script(*native_script(["Hel", "lo"], prompt=1.0, gap=0.01))
    got, _, error = await run(native(native_fake, from_first_token=False), with_sink=False)
    assert texts(got) == [] and error is not None
    assert (error.code, error.before_first_token) == ("upstream_timeout", True) and "deadline" in error.message


@pytest.mark.parametrize("with_sink", [False, True], ids=["consumer", "sink"])
async def test_the_deadline_still_ends_a_long_generation(native_fake: FakeChatCompletionsServer,
                                                         with_sink: bool) -> None:
    words = [f" w{i}" for i in range(20)]
    native_fake.script(*native_script(words, prompt=0.6, gap=0.05))
    got, sink, error = await run(native(native_fake, from_first_token=True), with_sink)
    assert 2 <= len(texts(got)) < 20  # ~0.4 s of the 1 s of deltas
    assert error is not None and (error.code, error.before_first_token) == ("upstream_timeout", False)
    assert "deadline" in error.message
    if with_sink:
        assert sink.calls >= 2  # the sink took reads (the first one too: this Sink takes any plain text)


# A sink that takes every read of plain text, the first one too: the attempt sleeps through them all. The deadline
# (0.6 s) is further off than the idle timeout (0.3 s), so the wait cannot rely on the idle timer to come back in
# time; 2 s of text must still end at the deadline, counted from the start or from the first token.


@pytest.mark.parametrize("from_first_token", [False, True])
async def test_a_sink_taking_every_read_still_meets_the_native_deadline(native_fake: FakeChatCompletionsServer,
                                                                         from_first_token: bool) -> None:
    words = [f" w{i}" for i in range(40)]
    native_fake.script(*native_script(words, prompt=0.0, gap=0.05))
    upstream = native(native_fake, from_first_token=from_first_token, deadline=0.6, idle_timeout=0.3)
    got, sink, error = await run(upstream, with_sink=True)
    assert error is not None and (error.code, error.before_first_token) == ("upstream_timeout", False), error
    assert "deadline" in error.message
    assert sink.calls >= 2 and len(texts(got)) < 40


@pytest.mark.parametrize("from_first_token", [False, True])
async def test_a_sink_taking_every_read_still_meets_the_chat_deadline(fake: FakeChatCompletionsServer,
                                                                       from_first_token: bool) -> None:
    steps: list[Step] = []
    for i in range(40):
        steps += [text(f" w{i}"), Sleep(0.05)]
    fake.script(*steps, finish(), Done())
    upstream = make(fake, deadline=0.6, idle_timeout=0.3, retries=0, deadline_from_first_token=from_first_token)
    got, sink, error = await run(upstream, with_sink=True)
    assert error is not None and (error.code, error.before_first_token) == ("upstream_timeout", False), error
    assert "deadline" in error.message
    assert sink.calls >= 2 and len(texts(got)) < 40
