"""Provider adapters vs the Chat Completions adapter: CPU per event of the gateway's adapter, in one process.

Both adapters read the same answer (N text tokens, then the finish and usage) from a SIMULATED upstream: the
in-process stand-in for the lean HTTP client of benchmarks/native_upstream.py, one upstream event per ``read()``, as
a live server writes tokens (no network: only the adapters' own work is timed, on the same event loop, interleaved in
the same run):

* ``chat``    — ``ChatCompletionsUpstream.generate`` over ``/chat/completions`` chunks (the named peer);
* ``gemini``  — ``GeminiUpstream.generate`` over ``streamGenerateContent?alt=sse`` chunks shaped as Gemini writes
                them (CRLF framing, ``usageMetadata``, ``modelVersion`` and ``responseId`` in every chunk);
* ``floor``   — the stand-in handing over the Gemini bytes, nothing parsed.

Goal (issue 39): ``gemini / chat <= 1.2``. ``--per-read K`` groups K events to a read.

Run: ``.venv/bin/python benchmarks/gemini_adapter.py [--events N] [--runs R] [--per-read K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from native_upstream import REQUEST, _attach, _ReplayHTTP, chat_reads, grouped  # (the same folder: the stand-in)

from respstream.server.upstream.chat_completions import ChatCompletionsUpstream
from respstream.server.upstream.gemini import GeminiUpstream


def gemini_reads(n: int) -> list[bytes]:
    """A Gemini stream of ``n`` text tokens (`` w0``, `` w1``...), one chunk a read, cumulative usage in each."""
    reads = []
    for i in range(n + 1):
        candidate: dict[str, object] = {"content": {"parts": [{"text": f" w{i}"}] if i < n else [{"text": ""}],
                                                    "role": "model"}, "index": 0}
        if i == n:
            candidate["finishReason"] = "STOP"
        chunk = {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": i,
                                                              "totalTokenCount": 5 + i},
                 "modelVersion": "gemini-2.5-flash", "responseId": "EXCPatOAKMrQjMcPteHVmQo"}
        reads.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\r\n\r\n")
    return reads


async def _generate(upstream: ChatCompletionsUpstream) -> int:
    count = 0
    async for _ in upstream.generate(REQUEST):
        count += 1
    return count


async def measure(events: int, runs: int, per_read: int = 1) -> dict[str, float]:
    chat = ChatCompletionsUpstream("http://replay.invalid/v1", name="chat", models=["m"])
    _attach(chat, grouped(chat_reads(events), per_read))
    gemini = GeminiUpstream("http://replay.invalid", name="gemini", models=["m"], api_key="k")
    _attach(gemini, grouped(gemini_reads(events), per_read))
    floor_client = _ReplayHTTP(grouped(gemini_reads(events), per_read))

    async def floor() -> int:
        response = await floor_client.post("http://replay.invalid/x", b"{}", {})
        while await response.read():
            pass
        return 0

    runners = {"floor": floor, "chat": lambda: _generate(chat), "gemini": lambda: _generate(gemini)}
    for run in runners.values():  # warm up
        await run()
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for turn in range(runs):
        order = list(runners.items()) if turn % 2 == 0 else list(reversed(runners.items()))  # sides alternate
        for name, run in order:
            started = time.process_time()
            await run()
            cpu[name].append(time.process_time() - started)
    for upstream in (chat, gemini):
        await upstream.aclose()
    return {name: statistics.median(values) * 1e6 / events for name, values in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000, help="text tokens per answer")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--per-read", type=int, default=1,
                        help="upstream events a read (1: a live model's token a read; 16: a busy gateway's reads)")
    args = parser.parse_args()
    per = asyncio.run(measure(args.events, args.runs, args.per_read))
    print(f"{args.events} text tokens per answer, {args.per_read} events a read, {args.runs} runs, "
          "CPU per token (median run):")
    for name, us in per.items():
        print(f"  {name:8s} {us:6.2f} us")
    print(f"gemini / chat = {per['gemini'] / per['chat']:.2f}   (goal <= 1.20)")


if __name__ == "__main__":
    main()
