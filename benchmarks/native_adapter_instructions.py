"""The two upstream adapters alone, in instructions (callgrind): per response (the lifecycle) and per token.

``native_upstream.py`` times the adapters in CPU time, which the shared machine's load moves by tens of percent;
``native_end_to_end.py --instructions`` counts the whole gateway. This counts what each adapter's ``generate`` executes
(user space, valgrind's callgrind) over ``native_upstream.py``'s SIMULATED upstream replay, K events a read: a run of
``--few`` responses and one of ``--many``, the difference divided by their difference, for answers of 2 tokens (about
the lifecycle alone) and of ``--tokens`` tokens; per token is the difference of the two over the extra tokens.

* ``chat``   — ``ChatCompletionsUpstream.generate`` (the named peer);
* ``native`` — ``ResponsesNativeUpstream.generate`` over an OpenAI-shaped Responses stream.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/native_adapter_instructions.py [--per-read 100] [--tokens 1000]``
(about 8 valgrind runs of under a minute each). ``--tree SRC`` counts another source tree's ``src`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def serve(kind: str, per_read: int, responses: int, tokens: int) -> None:
    """The counted process: ``responses`` answers of ``tokens`` tokens through one adapter."""
    sys.path.insert(0, str(HERE))
    from native_upstream import _attach, _generate, chat_reads, grouped, responses_reads

    from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
    from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream

    async def run() -> None:
        if kind == "chat":
            upstream = ChatCompletionsUpstream("http://replay.invalid/v1", name="chat", models=["m"])
            _attach(upstream, grouped(chat_reads(tokens), per_read))
        else:
            upstream = ResponsesNativeUpstream("http://replay.invalid/v1", name="native", models=["m"])
            _attach(upstream, grouped(responses_reads(tokens, numbered=True), per_read))
        for _ in range(responses):
            await _generate(upstream)
        await upstream.aclose()

    asyncio.run(run())


def count(tree: str, kind: str, per_read: int, responses: int, tokens: int) -> int:
    env = dict(os.environ, PYTHONPATH=tree)
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, "--serve",
            kind, "--per-read", str(per_read), "--responses", str(responses), "--tokens", str(tokens)]
    done = subprocess.run(argv, env=env, capture_output=True, check=True)
    found = re.search(rb"Collected : (\d+)", done.stderr)
    if not found:
        raise RuntimeError(f"no callgrind total: {done.stderr.decode()[-500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-read", type=int, default=100, help="upstream events a read")
    parser.add_argument("--tokens", type=int, default=1000, help="tokens of the long answer")
    parser.add_argument("--few", type=int, default=10)
    parser.add_argument("--many", type=int, default=40)
    parser.add_argument("--tree", default=str(HERE.parent / "src"))
    parser.add_argument("--serve", choices=["chat", "native"], help=argparse.SUPPRESS)
    parser.add_argument("--responses", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.per_read, args.responses, args.tokens)
        return
    print(f"instructions of each adapter's generate ({args.tree}, {args.per_read} events a read, "
          f"{args.many} - {args.few} responses):")
    for kind in ("chat", "native"):
        per = {}
        for tokens in (2, args.tokens):
            few = count(args.tree, kind, args.per_read, args.few, tokens)
            per[tokens] = (count(args.tree, kind, args.per_read, args.many, tokens) - few) / (args.many - args.few)
        token = (per[args.tokens] - per[2]) / (args.tokens - 2)
        print(f"  {kind:6s} a 2-token response: {per[2] / 1e3:,.0f} k; a token: {token / 1e3:,.2f} k; "
              f"a 200-token response: {(per[2] + 198 * token) / 1e3:,.0f} k", flush=True)


if __name__ == "__main__":
    main()
