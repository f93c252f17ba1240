"""Client throughput: the same Responses SSE bytes through four parsers, in one process (DESIGN §6, issue #2).

Peers, measured in this run on the same bytes:
  * openai SDK   — ``client.responses.create(stream=True)`` iterated (typed pydantic events), over the SDK's own
                   HTTP client (httpx2) with a MockTransport that returns the transcript in 64 KiB chunks.
  * httpx-sse    — ``httpx_sse.connect_sse`` over an httpx MockTransport, ``json.loads`` of every ``data``.
  * floor        — bare ``bytes.split(b"\\n\\n")`` + ``orjson.loads`` of each data slice (no typing, no state).
  * respstream   — ``StreamCore`` fed 64 KiB chunks: SSE decode + typed msgspec dispatch + sequencer + assembler +
                   rules, then ``.result``.
Goal (issue #2): respstream >= 50% of the floor and >= 40x the SDK.

Run: ``.venv/bin/python benchmarks/client_throughput.py [--events N] [--repeat R] [--sdk-events N]``.
``--memory`` also writes 100 MB and 1 GB transcripts to /tmp and reports the peak RSS of ``respstream replay``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

CHUNK = 64 * 1024


def build_transcript(n_events: int) -> bytes:
    """A realistic OpenAI-framed stream: created, in_progress, a function call, a long message of text deltas
    (with ``obfuscation`` and ``logprobs``, as api.openai.com sends them), done events, response.completed."""
    out: list[bytes] = []
    seq = 0

    def emit(obj: dict[str, object]) -> None:
        nonlocal seq
        obj["sequence_number"] = seq
        seq += 1
        out.append(b"event: " + str(obj["type"]).encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n")

    response = {"id": "resp_bench", "object": "response", "created_at": 1755000000, "status": "in_progress",
                "model": "gpt-4.1-mini", "output": [], "usage": None, "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": []}
    emit({"type": "response.created", "response": response})
    emit({"type": "response.in_progress", "response": response})
    fc = {"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1",
          "name": "get_weather"}
    emit({"type": "response.output_item.added", "output_index": 0, "item": fc})
    args = '{"city":"Amsterdam","unit":"celsius"}'
    for i in range(0, len(args), 6):
        emit({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
              "delta": args[i : i + 6], "obfuscation": "a1B2c3"})
    emit({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": args})
    fc_done = {**fc, "status": "completed", "arguments": args}
    emit({"type": "response.output_item.done", "output_index": 0, "item": fc_done})
    mid = "msg_68a1b2c3d4e5f6071829300000000001"
    emit({"type": "response.output_item.added", "output_index": 1,
          "item": {"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}})
    emit({"type": "response.content_part.added", "item_id": mid, "output_index": 1, "content_index": 0,
          "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}})
    words = ["The", " weather", " in", " Amsterdam", " is", " mild", ",", " with", " light", " rain", " today", "."]
    text_parts: list[str] = []
    n_deltas = max(n_events - seq - 4, 1)
    for i in range(n_deltas):
        d = words[i % len(words)]
        text_parts.append(d)
        emit({"type": "response.output_text.delta", "item_id": mid, "output_index": 1, "content_index": 0,
              "delta": d, "logprobs": [], "obfuscation": "xYz12AbC"[: 8 - len(d) % 8 or 1]})
    text = "".join(text_parts)
    emit({"type": "response.output_text.done", "item_id": mid, "output_index": 1, "content_index": 0, "text": text,
          "logprobs": []})
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    emit({"type": "response.content_part.done", "item_id": mid, "output_index": 1, "content_index": 0,
          "part": part})
    msg = {"id": mid, "type": "message", "status": "completed", "content": [part], "role": "assistant"}
    emit({"type": "response.output_item.done", "output_index": 1, "item": msg})
    usage = {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n_deltas,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 40 + n_deltas}
    emit({"type": "response.completed",
          "response": {**response, "status": "completed", "output": [fc_done, msg], "usage": usage}})
    return b"".join(out)


def chunks(data: bytes) -> Iterator[bytes]:
    for i in range(0, len(data), CHUNK):
        yield data[i : i + CHUNK]


# --- the four contenders: each returns the number of events it produced ------------------------------------------


def run_floor(data: bytes) -> int:
    loads = orjson.loads
    n = 0
    for block in data.split(b"\n\n"):
        at = block.find(b"data: ")
        if at >= 0:
            loads(block[at + 6 :])
            n += 1
    return n


def run_respstream(data: bytes) -> int:
    from respstream.protocol.stream import StreamCore

    core = StreamCore()
    n = 0
    for chunk in chunks(data):
        core.feed(chunk)
        n += len(core.events())
    core.close()
    n += len(core.events())
    result = core.result
    assert result.status == "completed" and not result.violations, (result.status, result.violations[:3])
    return n


def run_httpx_sse(data: bytes) -> int:
    import httpx
    from httpx_sse import connect_sse

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks(data))

    n = 0
    with httpx.Client(transport=httpx.MockTransport(handler)) as client, connect_sse(
        client, "POST", "http://bench.invalid/v1/responses"
    ) as source:
        for sse in source.iter_sse():
            json.loads(sse.data)
            n += 1
    return n


def run_openai_sdk(data: bytes) -> int:
    import httpx2
    from openai import OpenAI

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=chunks(data))

    client = OpenAI(api_key="sk-bench", base_url="http://bench.invalid/v1",
                    http_client=httpx2.Client(transport=httpx2.MockTransport(handler)), max_retries=0)
    n = 0
    stream = client.responses.create(model="gpt-4.1-mini", input="hi", stream=True)
    for _event in stream:
        n += 1
    return n


def measure(fn: Callable[[bytes], int], data: bytes, repeat: int) -> tuple[float, int]:
    """Best of ``repeat`` runs after one warm-up on a small transcript (imports, lazy model building):
    (events per second, events)."""
    fn(build_transcript(500))
    best = float("inf")
    n = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        n = fn(data)
        best = min(best, time.perf_counter() - t0)
    return n / best, n


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def peak_rss_of_replay(path: Path) -> tuple[float, float, int]:
    """Run ``respstream replay --json`` on ``path`` in a child; return (seconds, peak RSS MiB, exit code)."""
    exe = Path(sys.executable).parent / "respstream"
    t0 = time.perf_counter()
    proc = subprocess.run([str(exe), "replay", "--json", str(path)], stdout=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - t0
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # max over children so far (run small first)
    return elapsed, rss_kib / 1024, proc.returncode


def write_big(path: Path, target_bytes: int) -> None:
    unit = build_transcript(20_000)
    head, _, _ = unit.partition(b"event: response.output_text.delta")
    # one stream: the head (created ... content_part.added), then delta blocks renumbered, then a completed event
    seq = head.count(b"\n\n")
    delta_tpl = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":'
                 b'"msg_68a1b2c3d4e5f6071829300000000001","output_index":1,"content_index":0,"delta":" word",'
                 b'"logprobs":[],"obfuscation":"xYz","sequence_number":%d}\n\n')
    with path.open("wb") as fh:
        fh.write(head)
        written = len(head)
        batch: list[bytes] = []
        while written < target_bytes:
            block = delta_tpl % seq
            seq += 1
            batch.append(block)
            written += len(block)
            if len(batch) == 10_000:
                fh.write(b"".join(batch))
                batch.clear()
        fh.write(b"".join(batch))
        fh.write(b'event: response.completed\ndata: {"type":"response.completed","sequence_number":%d,'
                 b'"response":{"id":"resp_bench","status":"completed","output":[]}}\n\n' % seq)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sdk-events", type=int, default=20_000, help="the SDK is slow: it gets a prefix-sized run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="also measure replay peak RSS on 100 MB and 1 GB")
    args = parser.parse_args()

    data = build_transcript(args.events)
    small = build_transcript(args.sdk_events)
    print(f"machine: {machine()}")
    n_events = data.count(b"\n\n")
    print(f"transcript: {n_events} events, {len(data) / 1e6:.1f} MB; SDK run on {args.sdk_events} events")
    results: dict[str, float] = {}
    for name, fn, payload, repeat in (
        ("floor (split + orjson.loads)", run_floor, data, args.repeat),
        ("respstream StreamCore", run_respstream, data, args.repeat),
        ("httpx-sse + json.loads", run_httpx_sse, data, max(1, args.repeat // 2)),
        ("openai SDK responses.create(stream=True)", run_openai_sdk, small, 2),
    ):
        rate, n = measure(fn, payload, repeat)
        results[name] = rate
        print(f"  {name:<44} {rate:>12,.0f} events/s  ({n} events, {1e6 / rate:.2f} µs/event)")
    ours = results["respstream StreamCore"]
    floor = results["floor (split + orjson.loads)"]
    sdk = results["openai SDK responses.create(stream=True)"]
    sse = results["httpx-sse + json.loads"]
    print(f"respstream / floor     = {ours / floor:.2f}   (goal >= 0.50)")
    print(f"respstream / openai    = {ours / sdk:.1f}x  (goal >= 40x)")
    print(f"respstream / httpx-sse = {ours / sse:.1f}x")

    if args.memory:
        print("replay peak RSS (child process, ru_maxrss):")
        for label, size in (("100 MB", 100 * 10**6), ("1 GB", 10**9)):
            path = Path(f"/tmp/respstream-bench-{label.replace(' ', '')}.sse")
            if not path.exists() or abs(path.stat().st_size - size) > size // 100:
                write_big(path, size)
            seconds, rss, code = peak_rss_of_replay(path)
            print(f"  {label:>6}: {path.stat().st_size / 1e6:,.0f} MB in {seconds:.1f} s, peak RSS {rss:,.0f} MiB, "
                  f"exit {code}")


if __name__ == "__main__":
    main()
