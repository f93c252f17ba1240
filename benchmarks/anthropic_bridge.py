"""The gateway's Anthropic bridge vs LiteLLM's: server CPU per event, both in front of one SIMULATED Anthropic API.

Both gateways answer ``POST /v1/responses`` (``stream: true``) for model ``claude-sonnet-4-5`` by calling the same
SIMULATED Anthropic Messages server on loopback (not Anthropic: a raw-asyncio stand-in, started by this script, that
answers every ``POST /v1/messages`` with one pre-encoded stream of ``--tokens`` text deltas in the API's shapes,
``benchmarks/provider_adapters.py``'s ``messages_reads``, one event a write, and ``GET /v1/models`` with that
model). The peers:

* ``respstream``: ``respstream serve --upstream anthropic+http://127.0.0.1:PORT``;
* ``litellm``:    LiteLLM's proxy (pinned 1.108.7, from its own venv, ``--litellm-venv``), deployment
                  ``anthropic/claude-sonnet-4-5`` with ``api_base`` the same server: its Responses API bridge to the
                  Messages API. Offline: no telemetry, no cost-map download; a master key, loopback only.

Each gateway is pinned to core 0 (one worker each), the SIMULATED server and the load generator
(``benchmarks/loadgen.py``) to core 1. The rounds alternate which side goes first; a side's figure for a round is its
process tree's user + system CPU (from /proc) over that round's streams, divided by the events its clients received
(SSE frames, ``data:`` lines) and by its responses. respstream runs more streams a round than LiteLLM (``--streams``,
``--litellm-streams``): its CPU over a few dozen streams is a few clock ticks. Before the rounds one response of
each side is read whole and must hold every text delta of the SIMULATED answer, in order, and ``response.completed``.
Read the ratio, not the absolute figures (a shared machine).

Run: ``.venv/bin/python benchmarks/anthropic_bridge.py [--tokens N] [--streams S] [--concurrency C] [--rounds R]``.
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
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import run_load
from provider_adapters import messages_reads
from server_throughput import LITELLM_KEY, VENV_BIN, Proc, free_port, pinned

MODEL = "claude-sonnet-4-5"
BODY = json.dumps({"model": MODEL, "input": "hello", "stream": True, "max_output_tokens": 1024}).encode()
LITELLM_VENV_DEFAULT = str(Path.home() / ".cache" / "respstream-bench" / "litellm")
_FRAME = b"\ndata:"  # (one a frame on both sides: every SSE frame has one data: line after a newline)


# -- the SIMULATED Anthropic Messages API (run as: anthropic_bridge.py --serve-anthropic PORT_FILE --tokens N) -------

class _SimulatedAnthropic(asyncio.Protocol):
    """HTTP/1.1 with keep-alive: ``GET /v1/models...`` -> the model list; ``POST /v1/messages`` -> the stream."""

    def __init__(self, events: list[bytes], models: bytes) -> None:
        self.events, self.models = events, models
        self.length = sum(map(len, events))
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < head_end + 4 + length:
                return
            self.buffer = self.buffer[head_end + 4 + length:]
            self._answer(head[0].split(" ")[1] if " " in head[0] else "/")

    def _answer(self, path: str) -> None:
        transport = self.transport
        assert transport is not None
        if path.startswith("/v1/models"):
            transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                            % len(self.models) + self.models)
        elif path.startswith("/v1/messages"):
            transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                            b"request-id: req_simulated\r\ncontent-length: %d\r\n\r\n" % self.length)
            for event in self.events:  # (one event a write, as a live server sends them)
                transport.write(event)
        else:
            body = b'{"type":"error","error":{"type":"not_found_error","message":"no route"}}'
            transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                            % len(body) + body)


def serve_simulated_anthropic(port_file: str, tokens: int) -> None:
    models = json.dumps({"data": [{"type": "model", "id": MODEL, "display_name": "Claude (SIMULATED)",
                                   "created_at": "2025-09-29T00:00:00Z"}],
                         "has_more": False, "first_id": MODEL, "last_id": MODEL}).encode()
    events = messages_reads(tokens)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _SimulatedAnthropic(events, models), "127.0.0.1", 0)
        Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        server.close()

    asyncio.run(main())


# -- the gateways ---------------------------------------------------------------------------------------------------

def start_respstream(upstream: str) -> Proc:
    port = free_port()
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-simulated-not-a-key"}
    return Proc([str(VENV_BIN / "respstream"), "serve", "--port", str(port), "--upstream",
                 f"anthropic+{upstream}"], port, env=env)


def start_litellm(upstream: str, venv: Path, tmp: Path) -> Proc:
    binary = venv / "bin" / "litellm"
    if not binary.exists():
        raise FileNotFoundError(f"LiteLLM is not installed in {venv} (python3 -m venv {venv} && {venv}/bin/pip "
                                "install 'litellm[proxy]==1.108.7')")
    cfg = tmp / "litellm-anthropic.yaml"
    cfg.write_text(f"model_list:\n  - model_name: {MODEL}\n    litellm_params:\n      model: anthropic/{MODEL}\n"
                   f"      api_base: {upstream}\n      api_key: sk-ant-simulated-not-a-key\n"
                   "litellm_settings:\n  telemetry: false\n  drop_params: true\n")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
           "LITELLM_MASTER_KEY": LITELLM_KEY, "DISABLE_SCHEMA_UPDATE": "True", "NO_PROXY": "*"}
    port = free_port()
    return Proc([str(binary), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
                port, env=env, start_timeout=180)


def litellm_version(venv: Path) -> str:
    for found in sorted(venv.glob("lib/python3*/site-packages/litellm-*.dist-info")):
        return found.name.removeprefix("litellm-").removesuffix(".dist-info")
    return "?"


async def one_side(proc: Proc, headers: dict[str, str], streams: int, concurrency: int) -> dict[str, Any]:
    before = proc.sample()
    result = await run_load(proc.url, BODY, concurrency=concurrency, total=streams, time_limit=600, timeout=120,
                            headers=headers, frame=_FRAME)
    cpu = proc.sample().since(before).cpu_s
    return {"ok": result.ok, "errors": dict(result.errors), "events": result.events, "cpu_s": cpu,
            "cpu_us_per_event": cpu / result.events * 1e6 if result.events else None,
            "cpu_ms_per_response": cpu / result.ok * 1e3 if result.ok else None,
            "events_per_s": result.events_per_s}


def check_answer(name: str, proc: Proc, headers: dict[str, str], tokens: int) -> None:
    """One response of a side, read whole: every text delta of the SIMULATED answer, in order, then completed."""
    with httpx.Client(timeout=120) as client:
        raw = client.post(proc.url, content=BODY, headers={"content-type": "application/json", **headers}).text
    deltas, completed = [], False
    for line in raw.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            event = json.loads(line[5:])
            if event.get("type") == "response.output_text.delta":
                deltas.append(event["delta"])
            completed = completed or event.get("type") == "response.completed"
    want = "".join(f" w{i}" for i in range(tokens))
    if "".join(deltas) != want or not completed:
        raise RuntimeError(f"{name} did not stream the SIMULATED answer: {len(deltas)} deltas, completed "
                           f"{completed}: {raw[:600]!r}")


async def measure(args: argparse.Namespace, sides: dict[str, tuple[Proc, dict[str, str]]]) -> list[dict[str, Any]]:
    for name, (proc, headers) in sides.items():  # warm up (imports, pools, first-request paths), check the answer
        warm = await one_side(proc, headers, 20, 5)
        if warm["ok"] != 20:
            raise RuntimeError(f"warm-up failed on {proc.url}: {warm}")
        check_answer(name, proc, headers, args.tokens)
    streams = {"respstream": args.streams, "litellm": args.litellm_streams}
    rounds = []
    for number in range(args.rounds):
        order = list(sides) if number % 2 == 0 else list(reversed(sides))  # the sides alternate
        row = {name: await one_side(*sides[name], streams[name], args.concurrency) for name in order}
        rounds.append(row)
        print(json.dumps({"round": number + 1, "order": order, **row}), flush=True)
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=200, help="text deltas a response (default 200)")
    parser.add_argument("--streams", type=int, default=600,
                        help="respstream's streams a round (default 600: enough CPU ticks to measure)")
    parser.add_argument("--litellm-streams", type=int, default=30, help="LiteLLM's streams a round (default 30)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--litellm-venv", default=LITELLM_VENV_DEFAULT)
    parser.add_argument("--serve-anthropic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_anthropic:
        serve_simulated_anthropic(args.serve_anthropic, args.tokens)
        return
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the load generator beside the SIMULATED server, away from the gateways
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        port_file = tmp / "anthropic.port"
        simulated = subprocess.Popen(pinned(1, [sys.executable, __file__, "--serve-anthropic", str(port_file),
                                                "--tokens", str(args.tokens)]), start_new_session=True)
        procs: list[Proc] = []
        try:
            for _ in range(200):
                if port_file.exists() and port_file.read_text():
                    break
                asyncio.run(asyncio.sleep(0.05))
            upstream = f"http://127.0.0.1:{port_file.read_text()}"
            venv = Path(args.litellm_venv)
            procs.append(start_respstream(upstream))
            procs.append(start_litellm(upstream, venv, tmp))
            sides = {"respstream": (procs[0], {}),
                     "litellm": (procs[1], {"authorization": f"Bearer {LITELLM_KEY}"})}
            load = os.getloadavg()
            rounds = asyncio.run(measure(args, sides))
        finally:
            for proc in procs:
                proc.stop()
            simulated.send_signal(signal.SIGTERM)
            simulated.wait(timeout=10)
    ratios_event = [r["litellm"]["cpu_us_per_event"] / r["respstream"]["cpu_us_per_event"] for r in rounds]
    ratios_response = [r["litellm"]["cpu_ms_per_response"] / r["respstream"]["cpu_ms_per_response"] for r in rounds]
    print(f"\n{args.tokens} text deltas a response, {args.streams} (respstream) and {args.litellm_streams} (LiteLLM) "
          f"streams a round ({args.concurrency} at a time), {args.rounds} rounds, LiteLLM {litellm_version(venv)}, "
          f"load average before {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    for name in ("respstream", "litellm"):
        per_event = [r[name]["cpu_us_per_event"] for r in rounds]
        per_response = [r[name]["cpu_ms_per_response"] for r in rounds]
        events = statistics.median(r[name]["events"] / max(r[name]["ok"], 1) for r in rounds)
        errors = sum(sum(r[name]["errors"].values()) for r in rounds)
        print(f"  {name:10s} {statistics.median(per_event):8.1f} us CPU/event  "
              f"{statistics.median(per_response):7.2f} ms CPU/response  {events:.0f} events/response  "
              f"{errors} errors")
    print(f"litellm / respstream CPU per event: median {statistics.median(ratios_event):.1f}x "
          f"(rounds {min(ratios_event):.1f}-{max(ratios_event):.1f}); per response: median "
          f"{statistics.median(ratios_response):.1f}x (rounds {min(ratios_response):.1f}-{max(ratios_response):.1f})"
          "   (goal >= 50x)")


if __name__ == "__main__":
    main()
