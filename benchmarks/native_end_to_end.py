"""Native Responses upstream vs Chat Completions upstream END TO END: the gateway's CPU per event, same run.

``native_upstream.py`` times the two adapters alone, in one process. This one times the whole gateway (``respstream
serve`` on its default stack, a real subprocess) serving the same answer from each kind of upstream over loopback:

* ``chat``   — ``--upstream http://...``: a SIMULATED Chat Completions upstream (tests/fakes/chat_server.py) writing
               server_throughput.py's answer (200 tokens, finish, usage, ``[DONE]``), one chunk a write (the peer);
* ``native`` — ``--upstream responses+http://...``: the same SIMULATED server on ``/v1/responses`` writing the same
               200 tokens as an OpenAI-shaped Responses stream (``event:`` lines, sequence numbers, indices, the
               full lifecycle), one event a write.

Both gateways send the client the same events (208 a response). CPU is the gateway process's user + system time
(/proc) around each batch of ``--responses`` responses; the batches alternate (chat, native, native, chat, ...) for
``--rounds`` rounds and the ratio ``native / chat`` CPU per event is given per round and as the median: on this
shared machine the load moves between rounds, not within an interleaved pair. Issue 18's goal: ``<= 1.0``.

``--tree SRC``: also run both gateways on a second source tree (e.g. ``git archive`` of an older commit's ``src``),
interleaved with this tree's, for a before/after in the same run.

``--instructions N``: instead of CPU time, the user-space instructions each gateway executes for N responses, counted
by valgrind's callgrind (hop_instructions.py's ``count``: a run of 20 warm-up responses and one of 20 + N, the
difference divided by N): independent of the machine's load, which moves CPU time by tens of percent between rounds
on this shared 2-core machine. Under valgrind's slowdown the gateway reads the upstream in few, large reads (many
events a read), the shape of a gateway busier than its upstream; the kernel's share is not counted.

``--pace-ms P``: the SIMULATED upstreams pause P ms between writes, a live model's pace, so the gateway reads one
upstream event at a time (the default, back to back, is a saturated gateway reading many events a read). The two
regimes cost differently per event (each read is a wake-up, a socket read and a write to the client) and the native
upstream writes 5 more events a response than the chat one (its lifecycle), so both are worth measuring. With
``--tokens-only`` the pause is only between two tokens: the lifecycle events (and chat's finish, usage and ``[DONE]``)
are written at once, as a server writes them, since no model work happens between them.

Run: ``.venv/bin/python benchmarks/native_end_to_end.py [--responses 200] [--concurrency 4] [--rounds 9]``
(``[--instructions 40]``, ``[--pace-ms 5 --concurrency 16 --responses 96]``, ``[--instructions 20 --pace-ms 50]``).

Fairness (issue 33): both gateways run the same source tree (``PYTHONPATH`` set to it explicitly: the shared venv's
editable install points elsewhere), are pinned to core 0 while this process (load generator and both SIMULATED
upstreams, in threads) is pinned to core 1, and before timing one response from each is fetched and compared: the
same event types in the same order and the same text, or the run stops. A batch must take at least 20 clock ticks of
the gateway's CPU (/proc counts in ticks), which the defaults give. The gateway's log goes to a file, never to a pipe
nobody reads: an access-log line per request filled the pipe after a few hundred requests and the gateway blocked
(what the first runs saw as responses timing out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hop_instructions import count, wait_port
from loadgen import run_load
from native_upstream import responses_reads
from procstat import cpu_seconds
from server_throughput import (
    BODY,
    DELTAS,
    ROOT,
    VENV_BIN,
    encoded_steps,
    fake_upstream_steps,
    fake_upstream_tokens,
    pinned,
)
from server_throughput import free_port as _free_port

EVENTS = DELTAS + 8  # what the client gets a response: created, in_progress, added, part, deltas, done x3, completed


def start_upstreams(pace_ms: float = 0, tokens_only: bool = False) -> tuple[object, object]:
    """The two SIMULATED upstreams (in this process's threads: their CPU is not the gateway's); ``pace_ms``: a pause
    that long between writes (a live model's pace: every event becomes one read of the gateway), or with
    ``tokens_only`` only between two tokens' writes (the lifecycle events and the finish go out at once, as a server
    writes them: no model work happens between them)."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.chat_server import FakeChatCompletionsServer, Raw, Sleep

    def paced(writes: list[bytes], is_token: list[bool]) -> list[object]:
        out: list[object] = []
        for at, write in enumerate(writes):
            if at and pace_ms > 0 and (not tokens_only or (is_token[at] and is_token[at - 1])):
                out.append(Sleep(pace_ms / 1000))
            out.append(Raw(write))
        return out

    chat_writes = [step.data for step in encoded_steps(fake_upstream_steps())]
    chat = FakeChatCompletionsServer(models=["fake-model"])
    chat.script(*paced(chat_writes, [at < DELTAS for at in range(len(chat_writes))]))  # (repeats for every request)
    native_writes = responses_reads(DELTAS, numbered=True, words=fake_upstream_tokens())
    native = FakeChatCompletionsServer(models=["fake-model"], route="/v1/responses")
    native.script(*paced(native_writes, [b"output_text.delta" in write for write in native_writes]))
    chat.start()
    native.start()
    return chat, native


class Gateway:
    """``respstream serve --upstream SPEC`` from source tree ``tree`` (None: this one)."""

    def __init__(self, spec: str, config: Path, tree: str | None) -> None:
        self.port = _free_port()
        env = dict(os.environ)
        env["PYTHONPATH"] = tree or str(ROOT / "src")
        argv = [str(VENV_BIN / "python"), "-m", "respstream", "serve", "--port", str(self.port), "--upstream", spec,
                "--config", str(config)]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the process; closed in stop())
        self.proc = subprocess.Popen(pinned(0, argv), stdout=subprocess.DEVNULL, stderr=self.log, env=env,
                                     cwd=tempfile.gettempdir())
        wait_port(self.port, self.proc)
        self.url = f"http://127.0.0.1:{self.port}/v1/responses"

    def answer(self) -> tuple[list[str], str]:
        """One response's event types, in order, and its text (the same-work check)."""
        import httpx

        body = httpx.post(self.url, content=BODY, headers={"content-type": "application/json"}, timeout=60).text
        events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
        return [e["type"] for e in events], "".join(e["delta"] for e in events if e["type"].endswith("text.delta"))

    def cpu_us_per_event(self, responses: int, concurrency: int, warm_up: bool = False) -> float:
        before = cpu_seconds(self.proc.pid)
        result = asyncio.run(run_load(self.url, BODY, concurrency=concurrency, total=responses, time_limit=600,
                                      timeout=15, expected_events=EVENTS))
        spent = cpu_seconds(self.proc.pid) - before
        if not warm_up and spent < 20 / os.sysconf("SC_CLK_TCK"):
            print(f"  note: {self.url}: batch of {spent * 1000:.0f} ms CPU, under 20 clock ticks: raise --responses")
        if result.ok != responses:  # (reported, not fatal: the CPU is divided by the events that were sent)
            print(f"  note: {self.url}: {result.ok} of {responses} responses completed: {dict(result.errors)}")
        return spent / max(1, result.events) * 1e6

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=int, default=200, help="responses a batch")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tree", help="a second source tree to run as well (its src directory)")
    parser.add_argument("--pace-ms", type=float, default=0,
                        help="a pause between the upstreams' writes (a live model's pace; 0: as fast as they can)")
    parser.add_argument("--tokens-only", action="store_true",
                        help="with --pace-ms: pause only between two tokens (the lifecycle and finish at once)")
    parser.add_argument("--instructions", type=int, default=0, metavar="N",
                        help="count instructions (valgrind) for N responses instead of CPU time")
    args = parser.parse_args()
    if args.instructions:
        instructions(args)
        return
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})  # the load generator's and the fakes' core; the gateways get core 0
    print(f"load at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    chat_up, native_up = start_upstreams(args.pace_ms, args.tokens_only)
    trees: list[tuple[str, str | None]] = [("this tree", None)] + ([(args.tree, args.tree)] if args.tree else [])
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        config.write_text("upstream_probe_seconds = 0\n")
        gateways = {(label, kind): Gateway(spec, config, tree) for label, tree in trees
                    for kind, spec in (("chat", chat_up.url), ("native", f"responses+{native_up.url}"))}  # type: ignore[attr-defined]
        try:
            answers = {key: gateway.answer() for key, gateway in gateways.items()}
            reference = answers[trees[0][0], "chat"]
            for key, answer in answers.items():
                if answer != reference:
                    raise SystemExit(f"{key}: not the same events and text as the chat gateway's: "
                                     f"{len(answer[0])} events, {len(answer[1])} characters against "
                                     f"{len(reference[0])} and {len(reference[1])}")
            for gateway in gateways.values():  # warm-up: connections, caches, first-request work
                gateway.cpu_us_per_event(max(4, args.responses // 4), args.concurrency, warm_up=True)
            cost: dict[tuple[str, str], list[float]] = {key: [] for key in gateways}
            keys = list(gateways)
            for n in range(args.rounds):
                for key in keys if n % 2 == 0 else keys[::-1]:
                    cost[key].append(gateways[key].cpu_us_per_event(args.responses, args.concurrency))
        finally:
            for gateway in gateways.values():
                gateway.stop()
            chat_up.stop()  # type: ignore[attr-defined]
            native_up.stop()  # type: ignore[attr-defined]
    print(f"load at end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    pace = (f", upstream {'tokens' if args.tokens_only else 'writes'} {args.pace_ms:g} ms apart" if args.pace_ms
            else ", upstream writes back to back")
    print(f"gateway CPU per event ({args.rounds} rounds of {args.responses} responses, {args.concurrency} at once, "
          f"{EVENTS} events a response{pace}; median of rounds):")
    for key, values in cost.items():
        print(f"  {key[0]}: {key[1]}: {statistics.median(values):.1f} us  ({', '.join(f'{v:.1f}' for v in values)})")
    for label, _ in trees:
        ratios = [n / c for n, c in zip(cost[label, "native"], cost[label, "chat"], strict=True)]
        print(f"  {label}: native / chat CPU per event: {statistics.median(ratios):.2f} "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; {', '.join(f'{r:.2f}' for r in ratios)})")
    if args.tree:
        for kind in ("chat", "native"):
            ratios = [a / b for a, b in zip(cost["this tree", kind], cost[args.tree, kind], strict=True)]
            print(f"  {kind}: this tree / {args.tree}: {statistics.median(ratios):.2f}")


def instructions(args: argparse.Namespace) -> None:
    """``--instructions``: callgrind's count per event for each gateway, chat and native, per tree (with
    ``--pace-ms`` around 50, every upstream event is one read even under valgrind's slowdown)."""
    chat_up, native_up = start_upstreams(args.pace_ms, args.tokens_only)
    trees: list[tuple[str, str]] = [("this tree", str(ROOT / "src"))] + ([(args.tree, args.tree)] if args.tree else [])
    per: dict[tuple[str, str], float] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "gateway.toml"
            config.write_text("upstream_probe_seconds = 0\n")
            for label, tree in trees:
                for kind, spec in (("chat", chat_up.url), ("native", f"responses+{native_up.url}")):  # type: ignore[attr-defined]
                    base = count(spec, 0, args.concurrency, config, tree)
                    total = count(spec, args.instructions, args.concurrency, config, tree)
                    per[label, kind] = (total - base) / args.instructions / EVENTS
                    print(f"  {label}: {kind}: {per[label, kind] / 1e3:,.1f} k instructions an event", flush=True)
    finally:
        chat_up.stop()  # type: ignore[attr-defined]
        native_up.stop()  # type: ignore[attr-defined]
    for label, _ in trees:
        print(f"  {label}: native / chat instructions per event: {per[label, 'native'] / per[label, 'chat']:.3f}")


if __name__ == "__main__":
    main()
