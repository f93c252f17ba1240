"""The provider adapters vs the Chat Completions adapter: CPU per token of the gateway's adapters, in one process.

Every adapter reads the same answer (N text tokens, then the stop and usage) from the SIMULATED upstream of
``native_upstream.py`` (an in-process stand-in for the lean HTTP client handing over K upstream events a ``read()``;
no network, so only the adapters' own work is timed), on the same event loop, interleaved in the same run, the order
of the sides reversed every other run:

* ``chat``      — ``ChatCompletionsUpstream.generate`` over ``/chat/completions`` chunks (the named peer);
* ``anthropic`` — ``AnthropicUpstream.generate`` over a ``/v1/messages`` stream in the API's shapes (``event:``
                  lines, ``message_start``, ``content_block_*``, ``ping``, ``message_delta``, ``message_stop``);
* ``gemini``    — ``GeminiUpstream.generate`` over ``streamGenerateContent?alt=sse`` chunks shaped as Gemini writes
                  them (CRLF framing, ``usageMetadata`` with its counts growing, ``modelVersion`` and ``responseId``
                  in every chunk; at 16 a read, through the learned template of gemini/text_template.py);
* ``floor``     — the stand-in handing over the Gemini bytes, nothing parsed.

Goal (issue 39): ``anthropic / chat <= 1.2`` and ``gemini / chat <= 1.2``. ``--per-read K`` groups K events to a read
(1: a live model's token a read; 16: a gateway busier than its upstream).

Run: ``.venv/bin/python benchmarks/provider_adapters.py [--events N] [--runs R] [--per-read K] [--sides ...]
[--gemini-recorded] [--readers]`` (``--readers``: the two body readers alone, each answer a fresh reader).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from native_upstream import _attach, _generate, _ReplayHTTP, chat_reads, grouped  # (the same folder: the stand-in)

from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.chat.reads import ChatBodyReader
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.gemini import GeminiUpstream
from respstream.server.upstream.gemini.reads import GeminiBody
from respstream.server.upstream.gemini.stream import GeminiStream

SIDES = ("floor", "chat", "anthropic", "gemini")


def messages_reads(n: int) -> list[bytes]:
    """An Anthropic stream of ``n`` text deltas (`` w0``, `` w1``...), one event a read."""
    def event(data: dict[str, Any]) -> bytes:
        return f"event: {data['type']}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()

    out = [event({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 5, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 0, "output_tokens": 1}}}),
           event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
           event({"type": "ping"})]
    out += [event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f" w{i}"}})
            for i in range(n)]
    out += [event({"type": "content_block_stop", "index": 0}),
            event({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                   "usage": {"output_tokens": n}}),
            event({"type": "message_stop"})]
    return out


def gemini_reads(n: int, *, recorded: bool = False) -> list[bytes]:
    """A Gemini stream of ``n`` text tokens (`` w0``, `` w1``...), one chunk a read, cumulative usage in each.
    ``recorded``: the chunks as the recordings have them (a space after each key, ``promptTokensDetails`` and
    ``thoughtsTokenCount`` in the usage), else compact."""
    reads = []
    for i in range(n + 1):
        candidate: dict[str, object] = {"content": {"parts": [{"text": f" w{i}"}] if i < n else [{"text": ""}],
                                                    "role": "model"}, "index": 0}
        if i == n:
            candidate["finishReason"] = "STOP"
        usage: dict[str, object] = {"promptTokenCount": 5, "candidatesTokenCount": i, "totalTokenCount": 5 + i}
        if recorded:
            usage = {"promptTokenCount": 34, "candidatesTokenCount": i, "totalTokenCount": 34 + 68 + i,
                     "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 34}], "thoughtsTokenCount": 68}
        chunk = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash",
                 "responseId": "EXCPatOAKMrQjMcPteHVmQo"}
        data = json.dumps(chunk, separators=(",", ": ") if recorded else (",", ":"))
        reads.append(b"data: " + data.encode() + b"\r\n\r\n")
    return reads


async def measure(events: int, runs: int, per_read: int = 1, sides: tuple[str, ...] = SIDES,
                  recorded: bool = False) -> dict[str, float]:
    """Median CPU per token of each side (microseconds)."""
    chat = ChatCompletionsUpstream("http://replay.invalid/v1", name="chat", models=["m"])
    _attach(chat, grouped(chat_reads(events), per_read))
    anthropic = AnthropicUpstream("http://replay.invalid", name="anthropic", models=["m"], api_key="unused")
    _attach(anthropic, grouped(messages_reads(events), per_read))
    gemini = GeminiUpstream("http://replay.invalid", name="gemini", models=["m"], api_key="unused")
    _attach(gemini, grouped(gemini_reads(events, recorded=recorded), per_read))
    floor_client = _ReplayHTTP(grouped(gemini_reads(events, recorded=recorded), per_read))

    async def floor() -> int:
        response = await floor_client.post("http://replay.invalid/x", b"{}", {})
        while await response.read():
            pass
        return 0

    every: dict[str, Callable[[], Awaitable[int]]] = {
        "floor": floor, "chat": lambda: _generate(chat), "anthropic": lambda: _generate(anthropic),
        "gemini": lambda: _generate(gemini)}
    runners = {name: every[name] for name in sides}
    for name, run in runners.items():  # warm up, and check that every adapter gave the whole answer
        count = await run()
        if name != "floor" and count != events + 1:
            raise SystemExit(f"{name}: {count} chunks, not the {events} text deltas and the finish")
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for turn in range(runs):
        order = list(runners.items()) if turn % 2 == 0 else list(reversed(runners.items()))  # sides alternate
        for name, run in order:
            started = time.process_time()
            await run()
            cpu[name].append(time.process_time() - started)
    for upstream in (chat, anthropic, gemini):
        await upstream.aclose()
    return {name: statistics.median(values) * 1e6 / events for name, values in cpu.items()}


def measure_readers(events: int, runs: int, per_read: int, recorded: bool) -> dict[str, float]:
    """The body readers alone (no adapter, no event loop): CPU per token of ``ChatBodyReader.parse`` over the chat
    reads and of ``GeminiBody.feed`` over the Gemini reads, a fresh reader each answer (so each stream's own costs,
    learning its template and its counts growing a digit, are in), the sides alternated every run."""
    chat = grouped(chat_reads(events), per_read)
    gemini = grouped(gemini_reads(events, recorded=recorded), per_read)

    def chat_side() -> None:
        reader = ChatBodyReader("chat", ChunkTranslator())
        for raw in chat:
            reader.parse(raw)

    def gemini_side() -> None:
        body = GeminiBody(GeminiStream(name="gemini"))
        for raw in gemini:
            body.feed(raw)
        body.finish()

    sides = {"chat reader": chat_side, "gemini reader": gemini_side}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    for turn in range(runs + 2):
        for name, run in (list(sides.items()) if turn % 2 == 0 else list(reversed(sides.items()))):
            started = time.process_time()
            for _ in range(5):
                run()
            if turn >= 2:  # (two warm-up turns)
                cpu[name].append((time.process_time() - started) / 5)
    return {name: statistics.median(values) * 1e6 / events for name, values in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000, help="text tokens per answer")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--per-read", type=int, default=1,
                        help="upstream events a read (1: a live model's token a read; 16: a busy gateway's reads)")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"which sides (default {','.join(SIDES)})")
    parser.add_argument("--gemini-recorded", action="store_true",
                        help="Gemini's chunks as the recordings have them (spaced JSON, usage details and thoughts)")
    parser.add_argument("--readers", action="store_true",
                        help="time the chat and Gemini body readers alone (what the Gemini template changes)")
    args = parser.parse_args()
    if args.readers:
        readers = measure_readers(args.events, args.runs, args.per_read, args.gemini_recorded)
        print(f"{args.events} text tokens per answer, {args.per_read} events a read, {args.runs} runs, "
              "body readers only, CPU per token (median run):")
        for name, micros in readers.items():
            print(f"  {name:14s} {micros:6.3f} us")
        print(f"gemini reader / chat reader = {readers['gemini reader'] / readers['chat reader']:.2f}")
        return
    sides = tuple(side for side in args.sides.split(",") if side)
    if "chat" not in sides or not set(sides) <= set(SIDES):
        parser.error(f"--sides: a comma-separated subset of {','.join(SIDES)} with chat (the peer)")
    per = asyncio.run(measure(args.events, args.runs, args.per_read, sides, args.gemini_recorded))
    print(f"{args.events} text tokens per answer, {args.per_read} events a read, {args.runs} runs, "
          "CPU per token (median run):")
    for name, micros in per.items():
        print(f"  {name:10s} {micros:6.2f} us")
    for name in ("anthropic", "gemini"):
        if name in per:
            print(f"{name} / chat = {per[name] / per['chat']:.2f}   (goal <= 1.20)")


if __name__ == "__main__":
    main()
