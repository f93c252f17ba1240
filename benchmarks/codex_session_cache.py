"""Codex CLI sessions on the embedded model: how long each turn waits before it starts streaming, with the prompt-prefix
cache (upstream/embedded/slot_cache.py) across turns, sessions and a gateway restart. A benchmark, not a timed test.

The goals (issue #40, on a 2-core machine with `make serve`'s default model, the large one): a session's later turns
each start streaming in <= 30 s; a new session after the first one, the gateway restarted in between, starts its
first turn streaming in <= 60 s. The first-ever turn (nothing cached) is reported too.

What it runs: the real gateway (tests/clients/codex_gateway.py: the app as `respstream serve` builds it, the embedded
model, every response timed: seconds to its first SSE event, to its first output item, to its end) and the real Codex
CLI (`codex exec`, then `codex exec resume --last` for later turns), both inside a network namespace with only
loopback up (needs root and iproute2), so nothing leaves the machine. Session 1 runs ``--turns`` turns; then the
gateway is stopped and started again over the same data directory (the saved KV states stay on disk) and session 2
(a new Codex session in the same project folder: new session id and prompt_cache_key, the same instructions and
tools) runs one turn.
"Starts streaming" is the first streamed token (a text, reasoning or tool-argument delta) of the turn's first response
(response.created goes out at once; a server tool's item can come before the model has read anything).

Usage: python benchmarks/codex_session_cache.py [--model-size large|medium|small] [--turns 3] [--threads N]
       [--folder DIR] [--codex PATH/TO/codex.js] [--json]
Prints one line per response and a summary against the goals. The run's folder (project folder, Codex home, data
directory) is a fresh temporary one unless --folder names one, so the first turn is a cold read; --folder with an
earlier run's folder and --turns 0 measures only a new session after a restart on that run's saved cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = ROOT / "tests" / "clients" / "codex_gateway.py"
CODEX_CANDIDATES = [ROOT / "tests/clients/node/node_modules/@openai/codex/bin/codex.js"]  # `make clients` installs it
CODEX_MODEL = "gpt-6.1-sol"  # the pinned Codex's default model: the gateway serves it as `auto`
PORT = 8080
LATER_TURN_GOAL, NEW_SESSION_GOAL = 30.0, 60.0
NEW_SESSION_PROMPT = "Say goodbye in one short sentence."
PROMPTS = ["Say hello in one short sentence.", "Now say goodbye in one short sentence.",
           "Name one colour in one word.", "Name one fruit in one word.", "Count to three."]


def _netns() -> str:
    name = f"respstream-bench-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
    return name


class Gateway:
    """codex_gateway.py in the namespace, with the embedded model; its timing records read back per response."""

    def __init__(self, netns: str, data_dir: Path, record: Path, model_size: str, threads: int | None) -> None:
        env = {**os.environ, "RESPSTREAM_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT / "src")}
        options = [f"--model-size={model_size}", "--progress=5"] + ([f"--threads={threads}"] if threads else [])
        self.record = record
        self.log = record.with_suffix(".log").open("a")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, str(GATEWAY), "platform", str(PORT), str(record),
             "embedded", *options, CODEX_MODEL], stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            self.stop()
            raise SystemExit(f"the gateway did not start; see {record.with_suffix('.log')}")

    def timings(self) -> list[dict[str, Any]]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return [e for e in map(json.loads, lines) if e["type"] == "timing" and e["path"].endswith("/responses")]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _codex(netns: str, codex: Path, home: Path, work: Path, prompt: str, resume: bool) -> float:
    env = {**os.environ, "CODEX_HOME": str(home), "RESPSTREAM_API_KEY": "bench", "NO_COLOR": "1"}
    command = [shutil.which("node") or "node", str(codex), "exec", "--skip-git-repo-check"]
    command += ["resume", "--last", prompt] if resume else [prompt]
    started = time.monotonic()
    done = subprocess.run(["ip", "netns", "exec", netns, *command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        print(f"  codex exited {done.returncode}: {done.stderr[-800:]}", file=sys.stderr)
    return time.monotonic() - started


def _home(folder: Path, port: int) -> Path:
    home = folder / "codex-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model_provider = "respstream"\nstream_max_retries = 0\n\n[model_providers.respstream]\nname = "respstream"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "RESPSTREAM_API_KEY"\n')
    return home


def _turn(label: str, timings: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    first = timings[0] if timings else {}
    usage = first.get("usage") or {}
    row = {"turn": label, "responses": len(timings), "first_stream_s": first.get("first_delta"),
           "first_output_item_s": first.get("first_output_item"),
           "first_response_end_s": first.get("end"), "input_tokens": usage.get("input_tokens"),
           "cached_tokens": (usage.get("input_tokens_details") or {}).get("cached_tokens"), "codex_wall_s": wall}
    print(f"{label}: first token after {row['first_stream_s']} s (first output item {row['first_output_item_s']} s; "
          f"{row['input_tokens']} input tokens, "
          f"{row['cached_tokens']} cached), {len(timings)} responses, codex {wall:.1f} s", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-size", default="large", choices=("small", "medium", "large"))
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--folder", type=Path, default=None,
                        help="the run's folder (project, Codex home, data dir); reuse one to start from its cache")
    parser.add_argument("--codex", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    codex = args.codex or next((p for p in CODEX_CANDIDATES if p.exists()), None)
    if codex is None or not codex.exists():
        raise SystemExit("Codex CLI not found: `make clients` (npm ci in tests/clients/node) or pass --codex")
    folder = args.folder or Path(tempfile.mkdtemp(prefix="codex-session-cache-"))
    data_dir = folder / "data"
    netns = _netns()
    rows: list[dict[str, Any]] = []
    try:
        record = folder / "requests.jsonl"
        gateway = Gateway(netns, data_dir, record, args.model_size, args.threads)
        # Both sessions in one project folder and one Codex home, as a user starts a new session in the same repo.
        home, work = _home(folder, PORT), folder / "work"
        work.mkdir(exist_ok=True)
        try:
            for turn in range(args.turns):
                before = len(gateway.timings())
                wall = _codex(netns, codex, home, work, PROMPTS[turn % len(PROMPTS)], resume=turn > 0)
                rows.append(_turn(f"session 1 turn {turn + 1}", gateway.timings()[before:], wall))
        finally:
            gateway.stop()
        saved = sorted(p.stat().st_size for p in data_dir.glob("prefix-cache/*/*.bin"))
        print(f"restart: {len(saved)} saved KV states on disk, {sum(saved) / 1e6:.0f} MB", flush=True)
        gateway = Gateway(netns, data_dir, record, args.model_size, args.threads)
        try:
            before = len(gateway.timings())
            # Another first request than session 1's: only the instructions, tools and project context are shared.
            wall = _codex(netns, codex, home, work, NEW_SESSION_PROMPT, resume=False)
            rows.append(_turn("session 2 turn 1 (after restart)", gateway.timings()[before:], wall))
        finally:
            gateway.stop()
    finally:
        subprocess.run(["ip", "netns", "del", netns], check=False)
    later = [r["first_stream_s"] for r in rows[1:-1] if r["first_stream_s"] is not None]
    new_session = rows[-1]["first_stream_s"]
    summary = {"model_size": args.model_size,
               "first_ever_turn_s": rows[0]["first_stream_s"] if args.turns else None,
               "later_turns_max_s": max(later) if later else None,
               "later_turns_goal_met": bool(later) and max(later) <= LATER_TURN_GOAL,
               "new_session_after_restart_s": new_session,
               "new_session_goal_met": new_session is not None and new_session <= NEW_SESSION_GOAL,
               "turns": rows, "folder": str(folder)}
    print(json.dumps(summary, indent=2) if args.json else
          f"first-ever turn {summary['first_ever_turn_s']} s; later turns max {summary['later_turns_max_s']} s "
          f"(goal <= {LATER_TURN_GOAL:g}: {summary['later_turns_goal_met']}); new session after restart "
          f"{new_session} s (goal <= {NEW_SESSION_GOAL:g}: {summary['new_session_goal_met']})")


if __name__ == "__main__":
    main()
