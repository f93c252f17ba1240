"""Overhead vs the model: time to first token and tokens/s, direct to llama.cpp vs through the respstream gateway.

Usage (from the repository root)::

    .venv/bin/python benchmarks/gateway_overhead.py [--runs 6] [--max-tokens 64] [--markdown]

Peer: llama.cpp's own OpenAI-compatible ``/v1/chat/completions`` (``stream: true``), serving SmolLM2-135M-Instruct
through the ``xllamacpp`` wheel, started exactly as the gateway's ``embedded`` upstream starts it. Ours: the gateway
(``respstream serve`` in its own process, ``openai`` dialect, memory store) with that same llama.cpp server as its
upstream, asked the same prompts through ``POST /v1/responses`` (``stream: true``).

Fairness: greedy decoding (``temperature: 0``) and one llama.cpp slot, so both paths generate the same tokens one
request at a time; the two paths alternate per prompt (direct first on even runs, gateway first on odd ones) so
drift on a shared machine hits both. Server-side tools are disabled in the gateway's config so the model sees the
same prompt (the script checks that prompt token counts match and says so). Both clients parse SSE the same plain way
(line split + ``json.loads``), each request on a fresh loopback connection. TTFT = request sent -> first text token
received; tokens/s = (text chunks - 1) / (last chunk - first chunk), per request. Added TTFT is the median of the
per-prompt paired differences.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

PROMPTS = (
    "Write a short poem about the sea.",
    "Explain what a bicycle gear does, in a few sentences.",
    "List five fruits and say one thing about each.",
    "Tell me a short story about a cat who learns to swim.",
    "Describe a sunrise over the mountains.",
)


@dataclass
class Sample:
    ttft_ms: float
    tokens: int
    tokens_per_s: float
    text: str
    prompt_tokens: int | None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _data_lines(response: httpx.Response) -> Any:
    for line in response.iter_lines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                yield json.loads(data)


def _sample(started: float, stamps: list[float], pieces: list[str], prompt_tokens: int | None) -> Sample:
    if not stamps:
        raise RuntimeError("no text tokens came back")
    span = stamps[-1] - stamps[0]
    rate = (len(stamps) - 1) / span if span > 0 else float("nan")
    return Sample((stamps[0] - started) * 1000, len(stamps), rate, "".join(pieces), prompt_tokens)


def direct(client: httpx.Client, base: str, prompt: str, max_tokens: int) -> Sample:
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    stamps: list[float] = []
    pieces: list[str] = []
    prompt_tokens = None
    started = time.perf_counter()
    with client.stream("POST", f"{base}/chat/completions", json=body) as response:
        response.raise_for_status()
        for chunk in _data_lines(response):
            for choice in chunk.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    stamps.append(time.perf_counter())
                    pieces.append(content)
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"].get("prompt_tokens")
    return _sample(started, stamps, pieces, prompt_tokens)


def gateway(client: httpx.Client, base: str, prompt: str, max_tokens: int) -> Sample:
    body = {"input": prompt, "stream": True, "max_output_tokens": max_tokens, "temperature": 0}
    stamps: list[float] = []
    pieces: list[str] = []
    prompt_tokens = None
    started = time.perf_counter()
    with client.stream("POST", f"{base}/responses", json=body) as response:
        response.raise_for_status()
        for event in _data_lines(response):
            kind = event.get("type")
            if kind == "response.output_text.delta" and event.get("delta"):
                stamps.append(time.perf_counter())
                pieces.append(event["delta"])
            elif kind in ("response.completed", "response.incomplete"):
                usage = (event.get("response") or {}).get("usage") or {}
                prompt_tokens = usage.get("input_tokens")
            elif kind in ("error", "response.failed"):
                raise RuntimeError(f"gateway stream failed: {event}")
    return _sample(started, stamps, pieces, prompt_tokens)


def start_gateway(upstream: str, port: int, config_dir: str) -> subprocess.Popen[bytes]:
    config = Path(config_dir) / "gateway.json"
    config.write_text(json.dumps({"tools": {"enabled": []}}))
    command = [
        sys.executable, "-m", "respstream", "serve", "--port", str(port), "--upstream", upstream,
        "--dialect", "openai", "--store", "memory", "--config", str(config),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gateway exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("gateway did not become healthy within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description="TTFT and tokens/s: direct llama.cpp vs through the gateway")
    parser.add_argument("--runs", type=int, default=6, help="passes over the prompt list (default 6)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--markdown", action="store_true", help="print the docs/benchmarks.md section")
    options = parser.parse_args()

    upstream = EmbeddedUpstream(n_parallel=1)
    asyncio.run(upstream.start())
    assert upstream.address is not None
    llama = f"{upstream.address}/v1"
    port = _free_port()
    with tempfile.TemporaryDirectory() as config_dir:
        process = start_gateway(llama, port, config_dir)
        ours = f"http://127.0.0.1:{port}/v1"
        try:
            results = measure(llama, ours, options.runs, options.max_tokens)
        finally:
            process.terminate()
            process.wait(timeout=10)
    asyncio.run(upstream.aclose())
    report(results, options)
    return 0


def measure(llama: str, ours: str, runs: int, max_tokens: int) -> dict[str, list[Sample]]:
    results: dict[str, list[Sample]] = {"direct": [], "gateway": []}
    paths = {"direct": (direct, llama), "gateway": (gateway, ours)}
    # A fresh connection per request on both paths: llama.cpp drops idle keep-alive connections, and a stale pooled
    # one would fail or add a reconnect to one side only.
    with httpx.Client(timeout=120, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        for name, (call, base) in paths.items():  # warm-up: model pages, connection pools, first-request costs
            for prompt in PROMPTS[:2]:
                call(client, base, prompt, max_tokens)
            print(f"warmed up {name}", file=sys.stderr)
        for run in range(runs):
            for prompt in PROMPTS:
                order = ("direct", "gateway") if run % 2 == 0 else ("gateway", "direct")
                for name in order:
                    call, base = paths[name]
                    results[name].append(call(client, base, prompt, max_tokens))
            print(f"run {run + 1}/{runs} done", file=sys.stderr)
    return results


def report(results: dict[str, list[Sample]], options: argparse.Namespace) -> None:
    direct_s, gateway_s = results["direct"], results["gateway"]
    ttft = {name: statistics.median(s.ttft_ms for s in samples) for name, samples in results.items()}
    rate = {name: statistics.median(s.tokens_per_s for s in samples) for name, samples in results.items()}
    added = statistics.median(g.ttft_ms - d.ttft_ms for d, g in zip(direct_s, gateway_s, strict=True))
    same_text = sum(d.text == g.text for d, g in zip(direct_s, gateway_s, strict=True))
    same_prompt = sum(d.prompt_tokens == g.prompt_tokens for d, g in zip(direct_s, gateway_s, strict=True))
    tokens = statistics.median(s.tokens for s in direct_s)
    ratio = rate["gateway"] / rate["direct"]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        "## Overhead vs the model",
        "",
        "`benchmarks/gateway_overhead.py`: SmolLM2-135M-Instruct on llama.cpp (`xllamacpp`, one slot, greedy), "
        f"the same {len(PROMPTS)} prompts x {options.runs} runs, {options.max_tokens} max tokens "
        f"(median {tokens:g} text tokens per answer), loopback, {cores} cores shared by llama.cpp, the gateway and "
        "the load generator. Peer: "
        "llama.cpp's own `/v1/chat/completions` stream. Ours: `respstream serve --dialect openai` (own process, "
        "server tools disabled so the model sees the same prompt) in front of the same llama.cpp server, "
        "`POST /v1/responses`.",
        "",
        "| path | TTFT p50 | tokens/s p50 |",
        "|---|---|---|",
        f"| direct llama.cpp chat completions | {ttft['direct']:.1f} ms | {rate['direct']:.1f} |",
        f"| through the gateway (`/v1/responses`) | {ttft['gateway']:.1f} ms | {rate['gateway']:.1f} |",
        f"| **gateway vs direct** | **{added:+.2f} ms** (median paired difference) | **{ratio:.3f}x** |",
        "",
        f"Goal: added TTFT < 5 ms at p50 ({'met' if added < 5 else 'NOT met'}), tokens/s within 2% "
        f"({'met' if ratio >= 0.98 else 'NOT met'}). Identical answer text on {same_text}/{len(direct_s)} paired "
        f"requests; identical prompt token counts on {same_prompt}/{len(direct_s)}.",
    ]
    text = "\n".join(lines)
    print(text if options.markdown else text.replace("**", ""))


if __name__ == "__main__":
    sys.exit(main())
