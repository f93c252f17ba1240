"""Direct reads on the native Responses upstream (server/upstream/responses/reads.py): a read of one
``output_text.delta`` handed to the round's sink from the connection's data callback, as the Chat Completions path
does (test_direct_reads.py). Against the SIMULATED server on ``/v1/responses`` (tests/fakes/chat_server.py with
``route``) over real loopback HTTP, writes paced so that each event is its own read: the sink really gets the reads,
outside any task; what it and the consumer see together is, chunk for chunk, what a consumer without a sink gets;
the terminal, a failure after direct reads and a sink that raises come through the consumer."""

from __future__ import annotations

import json
from typing import Any

from fakes.chat_server import FakeChatCompletionsServer, Raw, Sleep
from respstream.server.upstream.base import Finish, GenerationRequest, UpstreamError
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream

from .test_direct_reads import Sink, consume, flat

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}])
WORDS = [("" if i == 0 else " ") + f"word{i}" for i in range(20)]


def events(words: list[str], *, fail: bool = False) -> list[bytes]:
    """A Responses stream of ``words``: completed, or (``fail``) an ``error`` then ``response.failed`` after them."""
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "m", "type": "message", "role": "assistant", "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "item_id": "m", "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "text": ""}},
        *({"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": w}
          for w in words)]
    if fail:
        error = {"code": "server_error", "message": "the model crashed"}
        out += [{"type": "error", **error}, {"type": "response.failed",
                                             "response": {"id": "r", "status": "failed", "error": error}}]
    else:
        text = "".join(words)
        item = {"id": "m", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        out += [{"type": "response.output_text.done", "item_id": "m", "output_index": 0, "content_index": 0,
                 "text": text},
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [item]}}]
    return [f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
            for n, e in enumerate(out)]


def paced(reads: list[bytes]) -> list[Any]:
    return [step for raw in reads for step in (Raw(raw), Sleep(0.01))]


async def both_ways(responses_server: FakeChatCompletionsServer, reads: list[bytes], **sink_options: Any
                    ) -> tuple[list[Any], list[Any], Sink, list[BaseException | None]]:
    upstream = ResponsesNativeUpstream(responses_server.url, name="native", idle_timeout=5.0, retries=0,
                                       models=["fake-model"])
    logs: list[list[Any]] = [[], []]
    errors: list[BaseException | None] = [None, None]
    sink = Sink(logs[0], **sink_options)
    try:
        for n, with_sink in enumerate((sink, None)):
            responses_server.script(*paced(reads))
            try:
                await consume(upstream, with_sink, logs[n])  # type: ignore[arg-type]
            except (UpstreamError, RuntimeError) as exc:
                errors[n] = exc
    finally:
        await upstream.aclose()
    return logs[0], logs[1], sink, errors


async def test_plain_reads_go_to_the_sink_from_the_data_callback(responses_server: FakeChatCompletionsServer) -> None:
    direct, plain, sink, errors = await both_ways(responses_server, events(WORDS))
    assert errors == [None, None]
    assert flat(direct) == flat(plain)
    assert sink.calls >= 10 and sink.in_task == 0, (sink.calls, sink.in_task)
    assert isinstance(flat(direct)[-1], Finish) and direct[-1][0] == "yield"
    assert [kind for kind, _ in direct].count("sink") == sink.calls


async def test_a_failure_after_direct_reads_is_raised_with_the_text_before_it(
        responses_server: FakeChatCompletionsServer) -> None:
    direct, plain, sink, errors = await both_ways(responses_server, events(WORDS, fail=True))
    assert sink.calls >= 10
    assert flat(direct) == flat(plain)
    assert all(isinstance(e, UpstreamError) and "server_error" in e.message for e in errors), errors
    assert not errors[0].before_first_token  # type: ignore[union-attr]


async def test_a_sink_that_raises_ends_the_stream_with_its_error(responses_server: FakeChatCompletionsServer) -> None:
    _, _, sink, errors = await both_ways(responses_server, events(WORDS), raise_at=3)
    assert sink.calls == 3
    assert isinstance(errors[0], RuntimeError) and "the sink broke" in str(errors[0])
    assert errors[1] is None
