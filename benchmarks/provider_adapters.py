"""Anthropic Messages upstream vs Chat Completions upstream: CPU per event of the gateway's adapter, in one process.

Both adapters read the same answer (N text tokens, then the stop and usage) from the SIMULATED upstream of
``native_upstream.py`` (an in-process stand-in for the lean HTTP client handing over one upstream event per
``read()``, as a live server writes tokens; no network, so only the adapters' own work is timed, interleaved in the
same run):

* ``chat``      — ``ChatCompletionsUpstream.generate`` over ``/chat/completions`` chunks (the named peer);
* ``anthropic`` — ``AnthropicUpstream.generate`` over a ``/v1/messages`` stream in the API's shapes (``event:``
                  lines, ``message_start``, ``content_block_*``, ``ping``, ``message_delta``, ``message_stop``).

The goal (issue 39) is ``anthropic / chat <= 1.2``. ``--per-read K`` groups K events to a read.

Run: ``.venv/bin/python benchmarks/provider_adapters.py [--events N] [--runs R] [--per-read K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from native_upstream import _attach, _generate, chat_reads, grouped

from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.chat_completions import ChatCompletionsUpstream


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


async def measure(events: int, runs: int, per_read: int = 1) -> dict[str, float]:
    chat = ChatCompletionsUpstream("http://replay.invalid/v1", name="chat", models=["m"])
    _attach(chat, grouped(chat_reads(events), per_read))
    anthropic = AnthropicUpstream("http://replay.invalid", name="anthropic", models=["m"], api_key="unused")
    _attach(anthropic, grouped(messages_reads(events), per_read))
    runners = {"chat": lambda: _generate(chat), "anthropic": lambda: _generate(anthropic)}
    for run in runners.values():  # warm up
        await run()
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for n in range(runs):
        order = list(runners.items()) if n % 2 == 0 else list(reversed(runners.items()))  # alternate the sides
        for name, run in order:
            started = time.process_time()
            await run()
            cpu[name].append(time.process_time() - started)
    for upstream in (chat, anthropic):
        await upstream.aclose()
    return {name: statistics.median(values) * 1e6 / events for name, values in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--per-read", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(measure(args.events, args.runs, args.per_read))
    for name, micros in result.items():
        print(f"{name:10s} {micros:7.2f} us CPU/event")
    print(f"anthropic / chat = {result['anthropic'] / result['chat']:.2f}x")


if __name__ == "__main__":
    main()
