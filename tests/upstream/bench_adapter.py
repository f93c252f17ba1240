"""Per-chunk cost of the Chat Completions adapter (``ChatCompletionsUpstream.generate``) against a SIMULATED upstream.

The fake upstream (tests/fakes/chat_server.py, uvicorn) runs in a child process so its CPU does not share our GIL;
it streams N text chunks (one write each, no delay) + finish + usage + [DONE] for every request. Measured in this
process, per chunk: wall time and CPU time of

- ``raw``: httpx streaming the same body, bytes only (the floor: transport, no parsing), the named peer;
- ``adapter``: ``ChatCompletionsUpstream.generate`` (SSE decode + JSON + translation + chunk objects);

plus time to the first chunk on a fresh adapter (connection setup) and on a warm one.

Run: .venv/bin/python tests/upstream/bench_adapter.py [runs] [chunks] [--profile | --in-process]
(``--in-process``: no network, an httpx mock transport replays the reads; the adapter's own CPU per chunk.)
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}])


def serve(chunks: int) -> None:
    """Child process: the fake upstream; prints its URL, then runs until stdin closes."""
    from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text, usage

    server = FakeChatCompletionsServer().start()
    server.script(*[text(f" w{i}") for i in range(chunks)], finish(), usage(5, chunks), Done())
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


async def raw_run(client: httpx.AsyncClient, url: str) -> None:
    body = {"model": "fake-model", "messages": REQUEST.messages, "stream": True}
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        async for _ in response.aiter_bytes():
            pass


async def adapter_run(upstream: ChatCompletionsUpstream) -> int:
    count = 0
    async for _ in upstream.generate(REQUEST):
        count += 1
    return count


async def first_chunk(upstream: ChatCompletionsUpstream) -> float:
    started = time.perf_counter()
    gen = upstream.generate(REQUEST)
    await anext(gen)
    elapsed = time.perf_counter() - started
    await gen.aclose()
    return elapsed


async def measure(url: str, runs: int, chunks: int) -> None:
    per = 1e6 / chunks
    results: dict[str, tuple[float, float]] = {}
    client = httpx.AsyncClient(timeout=30)
    upstream = ChatCompletionsUpstream(url, name="fake", models=["fake-model"])
    for name, run in (("raw", lambda: raw_run(client, url)), ("adapter", lambda: adapter_run(upstream))):
        for _ in range(3):
            await run()  # warm up: connections, caches
        walls, cpus = [], []
        for _ in range(runs):
            wall, cpu = time.perf_counter(), time.process_time()
            await run()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        results[name] = (statistics.median(walls) * per, statistics.median(cpus) * per)
    cold = []
    for _ in range(10):
        fresh = ChatCompletionsUpstream(url, name="fake", models=["fake-model"])
        cold.append(await first_chunk(fresh))
        await fresh.aclose()
    warm = [await first_chunk(upstream) for _ in range(10)]
    raw_first = []
    for _ in range(10):
        started = time.perf_counter()
        body = {"model": "fake-model", "messages": REQUEST.messages, "stream": True}
        async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
            async for _ in response.aiter_bytes():
                raw_first.append(time.perf_counter() - started)
                break
    await upstream.aclose()
    await client.aclose()
    raw_wall, raw_cpu = results["raw"]
    wall, cpu = results["adapter"]
    print(f"{chunks} chunks x {runs} runs; per chunk (median run):")
    print(f"  raw httpx bytes   wall {raw_wall:7.1f} us   cpu {raw_cpu:7.1f} us")
    print(f"  adapter           wall {wall:7.1f} us   cpu {cpu:7.1f} us   ({wall / raw_wall:.2f}x raw wall)")
    print(f"  adapter-only cpu  {cpu - raw_cpu:7.1f} us per chunk above raw")
    print(
        f"  first chunk: fresh adapter {statistics.median(cold) * 1e3:.2f} ms, warm adapter "
        f"{statistics.median(warm) * 1e3:.2f} ms, raw httpx first bytes {statistics.median(raw_first) * 1e3:.2f} ms"
    )


class _Replay(httpx.AsyncByteStream):
    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            yield read


def sse_reads(chunks: int) -> list[bytes]:
    """The same stream the fake upstream sends, one read per event (as loopback delivers it when not coalesced)."""
    head = b'{"id":"chatcmpl-fake","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,'
    reads = [b"data: " + head + b'"delta":{"content":" w%d"},"finish_reason":null}]}\n\n' % i for i in range(chunks)]
    reads.append(b"data: " + head + b'"delta":{},"finish_reason":"stop"}]}\n\n')
    reads.append(b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}\n\n' % chunks)
    reads.append(b"data: [DONE]\n\n")
    return reads


async def in_process(runs: int, chunks: int) -> None:
    """No network: an httpx transport replaying the reads, so only the adapter's own per-chunk work is timed."""
    reads = sse_reads(chunks)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Replay(reads))

    upstream = ChatCompletionsUpstream("http://replay.invalid/v1", name="replay", models=["fake-model"])
    upstream._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    upstream._client_loop = asyncio.get_running_loop()

    async def floor() -> None:  # the same transport, bytes only
        async with upstream._client.stream("POST", "http://replay.invalid/v1/chat/completions") as response:  # type: ignore[union-attr]
            async for _ in response.aiter_bytes():
                pass

    cpus: dict[str, list[float]] = {"floor": [], "adapter": []}
    for _ in range(3):
        await adapter_run(upstream)
    for _ in range(runs):
        for name, run in (("floor", floor), ("adapter", lambda: adapter_run(upstream))):
            started = time.process_time()
            await run()
            cpus[name].append(time.process_time() - started)
    await upstream.aclose()
    per = 1e6 / chunks
    floor_us = statistics.median(cpus["floor"]) * per
    adapter_us = statistics.median(cpus["adapter"]) * per
    print(f"in-process replay, {chunks} chunks x {runs} runs, cpu per chunk (median run):")
    print(f"  httpx bytes only  {floor_us:6.1f} us")
    print(f"  adapter           {adapter_us:6.1f} us   (adapter's own work {adapter_us - floor_us:.1f} us per chunk)")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--serve" in sys.argv:
        serve(int(args[0]))
        return
    if "--in-process" in sys.argv:
        asyncio.run(in_process(int(args[0]) if args else 200, int(args[1]) if len(args) > 1 else 200))
        return
    runs = int(args[0]) if args else 30
    chunks = int(args[1]) if len(args) > 1 else 200
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(chunks)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().decode().strip()
        if "--profile" in sys.argv:
            from pyinstrument import Profiler

            async def profiled() -> None:
                upstream = ChatCompletionsUpstream(url, name="fake", models=["fake-model"])
                await adapter_run(upstream)
                with Profiler(interval=0.0001, async_mode="disabled") as profiler:
                    for _ in range(runs):
                        await adapter_run(upstream)
                await upstream.aclose()
                profiler.print(show_all=False)

            asyncio.run(profiled())
        else:
            asyncio.run(measure(url, runs, chunks))
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=10)


if __name__ == "__main__":
    main()
