"""Measure SmolLM2 tokens/s: llama.cpp direct (xllamacpp in-process streaming callback; raw HTTP to its server)
versus through ChatCompletionsUpstream.

Run: .venv/bin/python tests/upstream/bench_embedded.py [runs] [tokens] [threads] [poll]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import httpx

from respstream.server.upstream.base import Finish, GenerationRequest, TextDelta
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

PROMPT = [{"role": "user", "content": "Write a long story about a lighthouse keeper and the sea."}]


async def main(runs: int, tokens: int) -> None:
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else None
    poll = int(sys.argv[4]) if len(sys.argv) > 4 else None
    upstream = EmbeddedUpstream(model_size="small", n_parallel=1, n_ctx=2048, n_threads=threads, poll=poll)
    await upstream.start()
    server, address = upstream._server, upstream.address
    body = {"messages": PROMPT, "max_tokens": tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    direct, http_raw, adapter = [], [], []

    def run_direct() -> float:
        count = 0

        def on_chunk(chunk: object) -> None:
            nonlocal count
            count += 1

        started = time.perf_counter()
        server.handle_chat_completions(dict(body), on_chunk)
        return (count - 3) / (time.perf_counter() - started)  # minus role, finish and usage chunks

    await asyncio.to_thread(run_direct)  # warm-up (first-run allocations, page cache)
    for _ in range(runs):
        direct.append(await asyncio.to_thread(run_direct))
        started = time.perf_counter()
        count = 0
        async with (
            httpx.AsyncClient(timeout=120) as client,
            client.stream("POST", f"{address}/v1/chat/completions", json=body) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data: {") and '"content":"' in line:
                    count += 1
        http_raw.append(count / (time.perf_counter() - started))
        started = time.perf_counter()
        count = 0
        usage = None
        request = GenerationRequest(model="smollm2-135m-instruct", messages=PROMPT, max_output_tokens=tokens,
                                    temperature=0.0)  # fmt: skip
        async for chunk in upstream.generate(request):
            if isinstance(chunk, TextDelta):
                count += 1
            elif isinstance(chunk, Finish):
                usage = chunk.usage
        adapter.append(count / (time.perf_counter() - started))
        assert usage is not None and usage.output_tokens == tokens
    await upstream.aclose()
    d, h, a = statistics.median(direct), statistics.median(http_raw), statistics.median(adapter)
    print(
        f"SmolLM2-135M Q4_1, threads={threads or 'auto'}, poll={poll}, {tokens} tokens x {runs} runs "
        "(median tokens/s, prompt eval included):"
    )
    print(f"  xllamacpp in-process callback (direct): {d:7.1f}")
    print(f"  raw HTTP to llama.cpp server (httpx):   {h:7.1f}  ({h / d:.2f}x direct)")
    print(f"  through ChatCompletionsUpstream:        {a:7.1f}  ({a / d:.2f}x direct, {a / h:.2f}x raw HTTP)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, int(sys.argv[2]) if len(sys.argv) > 2 else 128))
