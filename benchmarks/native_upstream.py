"""Native Responses upstream vs Chat Completions upstream: CPU per event of the gateway's adapter, in one process.

Both adapters read the same answer (N text tokens, then the finish and usage) from a SIMULATED upstream: an
in-process stand-in for the lean HTTP client (``server/upstream/http/stream.py``) that hands over one upstream event
per ``read()``, as a live server writes tokens (no network: only the adapters' own work is timed, on the same event
loop, in the same run; the real client's cost per read is the same for both paths):

* ``chat``           — ``ChatCompletionsUpstream.generate`` over ``/chat/completions`` chunks (the named peer);
* ``native-openai``  — ``ResponsesNativeUpstream.generate`` over an OpenAI-shaped ``/responses`` stream
                       (``event:`` lines, sequence numbers, indices, the full lifecycle);
* ``native-llamacpp``— the same over llama.cpp's shape (no sequence numbers, no indices: every event repaired);
* ``native-full``    — ``native-openai`` with the text-delta lane (``StreamCore.take_text_delta``) turned off: every
                       event typed, checked and assembled by ``feed`` (what the adapter did before the lane; the
                       before/after of that change, in the same run);
* ``floor``          — the stand-in handing over the same Responses bytes, nothing parsed.

The native path reads through the protocol core (SSE decode, sequencer, rules, assembler), so it also checks the
upstream's stream; the goal (issue 18) is that it costs no more per event than the Chat Completions path:
``native / chat <= 1.0``.

``--per-read K``: the upstream's events K to a read instead of one (the reads of a gateway that is busier than its
upstream: at full load the end-to-end benchmark's gateway reads a response in two or three reads, 13 to 208 events
each, its first read holding the lifecycle's opening events and the first deltas).

Run: ``.venv/bin/python benchmarks/native_upstream.py [--events N] [--runs R] [--per-read K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator

from text_events import text_response_events  # (the same folder)

from respstream.protocol.stream import StreamCore
from respstream.server.upstream.base import Chunk, GenerationRequest, ReadSink
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream
from respstream.server.upstream.responses.stream import ResponsesTranslator


class _FullPathCore(StreamCore):
    """The protocol core without its text-delta lane (for the ``native-full`` contender)."""

    def take_text_delta(self, chunk: bytes) -> str | None:
        return None


class _FullPathUpstream(ResponsesNativeUpstream):
    def _responses_attempt(self, request: GenerationRequest, deadline_at: float, sink: ReadSink | None = None
                           ) -> AsyncIterator[list[Chunk]]:
        translator = ResponsesTranslator(name=self.name)
        translator.core = _FullPathCore()
        return self._native_attempt(request, translator, deadline_at, sink)


REQUEST = GenerationRequest(model="m", messages=[{"role": "user", "content": "hi"}])


def chat_reads(n: int) -> list[bytes]:
    head = b'{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
    reads = [b"data: " + head + b'"delta":{"content":" w%d"},"finish_reason":null}]}\n\n' % i for i in range(n)]
    reads.append(b"data: " + head + b'"delta":{},"finish_reason":"stop"}]}\n\n')
    reads.append(b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}\n\n' % n)
    reads.append(b"data: [DONE]\n\n")
    return reads


def responses_reads(n: int, *, numbered: bool, words: list[str] | None = None) -> list[bytes]:
    """A Responses stream of ``n`` text deltas (``words``, default `` w0``, `` w1``...), one event a read."""
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
    words = words if words is not None else [f" w{i}" for i in range(n)]
    events = text_response_events(response, "msg_1", words, {"input_tokens": 5, "output_tokens": n})
    out: list[bytes] = []
    for seq, event in enumerate(events):
        if numbered:
            event = {"type": event["type"], "sequence_number": seq, **{k: v for k, v in event.items() if k != "type"}}
        else:
            event = {k: v for k, v in event.items() if k not in ("output_index", "content_index")}
        out.append(f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode())
    return out


class _ReplayResponse:
    """SIMULATED upstream body: what ``StreamResponse`` offers the adapters (status, headers, ``read``)."""

    status_code = 200
    headers: dict[str, str] = {"content-type": "text/event-stream"}
    complete = True  # (HttpUpstream._end_response's give_back asks: the whole body was read, nothing to drain)

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = iter(reads)

    async def read(self) -> bytes:
        return next(self._reads, b"")

    async def read_all(self, limit: int) -> bytes:
        return b"".join(self._reads)[:limit]

    async def aclose(self) -> None:
        pass


class _ReplayHTTP:
    """SIMULATED upstream: stands in for ``LeanHTTP``; every POST answers with the same reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> _ReplayResponse:
        return _ReplayResponse(self.reads)

    async def aclose(self) -> None:
        pass


def _attach(upstream: ChatCompletionsUpstream, reads: list[bytes]) -> None:
    upstream._lean_client = _ReplayHTTP(reads)  # type: ignore[assignment]
    upstream._lean_loop = asyncio.get_running_loop()


async def _generate(upstream: ChatCompletionsUpstream) -> int:
    count = 0
    async for _ in upstream.generate(REQUEST):
        count += 1
    return count


def grouped(reads: list[bytes], per_read: int) -> list[bytes]:
    """``reads`` joined ``per_read`` events to a read (what a gateway busier than its upstream reads at once)."""
    return [b"".join(reads[at : at + per_read]) for at in range(0, len(reads), per_read)]


async def measure(events: int, runs: int, per_read: int = 1) -> dict[str, float]:
    chat = ChatCompletionsUpstream("http://replay.invalid/v1", name="chat", models=["m"])
    _attach(chat, grouped(chat_reads(events), per_read))
    native_openai = ResponsesNativeUpstream("http://replay.invalid/v1", name="native", models=["m"])
    _attach(native_openai, grouped(responses_reads(events, numbered=True), per_read))
    native_llama = ResponsesNativeUpstream("http://replay.invalid/v1", name="llama", models=["m"])
    _attach(native_llama, grouped(responses_reads(events, numbered=False), per_read))
    native_full = _FullPathUpstream("http://replay.invalid/v1", name="full", models=["m"])
    _attach(native_full, grouped(responses_reads(events, numbered=True), per_read))
    floor_reads = grouped(responses_reads(events, numbered=True), per_read)
    floor_client = _ReplayHTTP(floor_reads)

    async def floor() -> int:
        response = await floor_client.post("http://replay.invalid/v1/responses", b"{}", {})
        while await response.read():
            pass
        await response.aclose()
        return 0

    runners = {
        "floor": floor,
        "chat": lambda: _generate(chat),
        "native-openai": lambda: _generate(native_openai),
        "native-llamacpp": lambda: _generate(native_llama),
        "native-full": lambda: _generate(native_full),
    }
    for run in runners.values():  # warm up
        await run()
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(runs):
        for name, run in runners.items():  # interleaved, so drift hits every peer alike
            started = time.process_time()
            await run()
            cpu[name].append(time.process_time() - started)
    for upstream in (chat, native_openai, native_llama, native_full):
        await upstream.aclose()
    await floor_client.aclose()
    return {name: statistics.median(values) * 1e6 / events for name, values in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000, help="text tokens per answer")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--per-read", type=int, default=1,
                        help="upstream events a read (1: a live model's token a read; 50: a busy gateway's reads)")
    args = parser.parse_args()
    per = asyncio.run(measure(args.events, args.runs, args.per_read))
    print(f"{args.events} text tokens per answer, {args.per_read} events a read, {args.runs} runs, "
          "CPU per token (median run):")
    for name, us in per.items():
        print(f"  {name:16s} {us:6.2f} us")
    own = {name: per[name] - per["floor"] for name in per if name != "floor"}
    print("adapter's own work (minus the floor): " + ", ".join(f"{k} {v:.2f} us" for k, v in own.items()))
    for name in ("native-openai", "native-llamacpp"):
        print(f"{name} / chat = {per[name] / per['chat']:.2f}   (goal <= 1.00: costs no more per event)")
    print(f"native-full / chat = {per['native-full'] / per['chat']:.2f}   (without the text-delta lane: the before)")


if __name__ == "__main__":
    main()
