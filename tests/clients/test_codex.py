"""Codex CLI (``@openai/codex``, pinned in node/package-lock.json, its native binary inside the npm package) runs
``codex exec`` against the gateway, both inside a network namespace this test creates (loopback only: nothing can
leave). Codex keeps its default config; its ``config.toml`` only adds a provider entry for the gateway (see
docs/clients.md). The gateway (codex_gateway.py: the real app, SIMULATED scripted upstream) records every request
body, so each case checks what Codex really sent back.

- ``exec_turn``: Codex's default model (the gateway serves its name as an alias of ``auto``): its tools come in an
  ``additional_tools`` input item, the upstream answers text, the turn completes with that text.
- ``code_mode_round_trip``: the same, the upstream calls Codex's freeform ``exec`` tool (namespace ``functions``,
  JavaScript; a ``custom`` tool): Codex runs it and sends ``custom_tool_call_output``; the turn ends with text.
- ``shell_round_trip``: ``model = "auto"`` (Codex knows no metadata for it, so it lists its generic tools in
  ``tools``, the shell as the function ``exec_command``): the upstream calls it, Codex runs the command in bash and
  sends ``function_call_output``; the turn ends with text.
Needs root for ``ip netns`` (CI has it): a missing capability fails under CI=true and skips otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import respstream

from .conftest import missing
from .matrix import ANSWER, CHECKS, DIALECTS, PROMPT, cases, scripted

pytestmark = pytest.mark.clients

HERE = Path(__file__).parent
CODEX = HERE / "node" / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
CODEX_MODEL = "gpt-6.1-sol"  # the pinned Codex's default model (what `codex exec` prints as "model:")
PORT = 8080  # a fresh namespace: every port is free (case i uses PORT + i)
# check -> (the tool the scripted upstream calls first, the model Codex is configured with; None: its default)
SETUPS: dict[str, tuple[str, str | None]] = {
    "exec_turn": ("", None),
    "code_mode_round_trip": ("functions__exec", None),
    "shell_round_trip": ("exec_command", "auto"),
}
# What the pinned Codex sends (docs/clients.md lists it; a new Codex version fails here until the doc is updated):
# (top-level body fields, tool types) with its default model, and with a model it has no metadata for.
SENT_DEFAULT = ({"client_metadata", "include", "input", "model", "parallel_tool_calls", "prompt_cache_key",
                 "reasoning", "store", "stream", "text", "tool_choice"}, {"namespace", "function", "custom"})
SENT_UNKNOWN_MODEL = ({"client_metadata", "include", "input", "model", "parallel_tool_calls", "prompt_cache_key",
                       "reasoning", "store", "stream", "tool_choice", "tools"}, {"namespace", "function", "web_search"})


def tool_types(body: dict[str, Any]) -> set[str]:
    listed = body.get("tools") or [t for i in body["input"] if i.get("type") == "additional_tools" for t in i["tools"]]
    return {t["type"] for t in listed} | {m["type"] for t in listed for m in t.get("tools", [])}


def codex_config(model: str | None, port: int) -> str:
    """Codex's config.toml: its defaults plus the provider entry for the gateway (docs/clients.md shows it)."""
    chosen = f'model = "{model}"\n' if model else ""
    return (f'{chosen}model_provider = "respstream"\n\n[model_providers.respstream]\nname = "respstream"\n'
            f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "RESPSTREAM_API_KEY"\n')


@pytest.fixture(scope="module")
def netns() -> Iterator[str]:
    """A network namespace with only loopback up, removed afterwards."""
    if not CODEX.exists() or shutil.which("node") is None:
        missing("Codex CLI is not installed (`make clients`: npm ci in tests/clients/node)")
    if shutil.which("ip") is None:
        missing("`ip` (iproute2) is missing: the Codex cases run in a network namespace")
    name = f"respstream-codex-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        missing(f"cannot create a network namespace (needs root): {made.stderr.strip()}")
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=10)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=10)


class NamespacedGateway:
    """codex_gateway.py in the namespace; ``requests()`` reads what it recorded."""

    def __init__(self, netns: str, dialect: str, upstream: str, record: Path, port: int,
                 options: tuple[str, ...] = ()) -> None:
        self.record = record
        src = str(Path(respstream.__file__).resolve().parents[1])  # this tree's code, as the tests run it
        env = {**os.environ, "PYTHONPATH": src}
        self.log = record.with_suffix(".log")
        with self.log.open("w") as log:  # a file, not a pipe nobody drains
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", netns, sys.executable, str(HERE / "codex_gateway.py"), dialect, str(port),
                 str(record), upstream, *options, CODEX_MODEL],
                stdout=subprocess.PIPE, stderr=log, text=True, env=env,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "ready" once it listens, or EOF when it died
        if line.strip() != "ready":
            self.stop()
            raise AssertionError(f"the gateway did not start: {self.log.read_text()[-3000:]}")

    def requests(self) -> list[dict[str, Any]]:
        return [e for e in self._entries() if e["type"] != "timing"]

    def timings(self) -> list[dict[str, Any]]:
        """Per response: seconds to its first event, first output item and end; its keep-alives; its text."""
        return [e for e in self._entries() if e["type"] == "timing"]

    def _entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def cpu_seconds(self) -> float:
        """The gateway's CPU time so far (all its threads, llama.cpp's included; `ip netns exec` execs it)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def run_codex(netns: str, home: Path, work: Path, prompt: str = PROMPT,
              timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEX_HOME": str(home), "RESPSTREAM_API_KEY": "test-key", "NO_COLOR": "1"}
    return subprocess.run(
        ["ip", "netns", "exec", netns, shutil.which("node") or "node", str(CODEX), "exec", "--skip-git-repo-check",
         prompt],
        cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False,
    )


def items(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in request["body"]["input"] if i.get("type") not in ("message", "additional_tools")]


@dataclass
class CodexRun:
    done: subprocess.CompletedProcess[str]
    sent: list[dict[str, Any]]  # what the gateway recorded


Runs = dict[tuple[str, str], Future[CodexRun]]  # (check, dialect) -> its run


def run_case(netns: str, check: str, dialect: str, port: int, folder: Path) -> CodexRun:
    """One `codex exec` against its own gateway (its check's upstream) on ``port`` in the namespace."""
    tool, model = SETUPS[check]
    home, work = folder / "codex-home", folder / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(codex_config(model, port))
    gateway = NamespacedGateway(netns, dialect, scripted(tool), folder / "requests.jsonl", port)
    try:
        return CodexRun(run_codex(netns, home, work), gateway.requests())
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def codex_runs(netns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Every case's run, three at a time, in the cases' order (each test waits for its own): a run is mostly
    waiting (Codex's own offline start-up retries take about 5 s of each), so this keeps the matrix's wall time
    down without loading the cores."""
    jobs = [(check, dialect) for check in CHECKS["Codex CLI"] for dialect in DIALECTS]
    pool = ThreadPoolExecutor(max_workers=3)
    try:
        yield {job: pool.submit(run_case, netns, *job, PORT + i, tmp_path_factory.mktemp("codex"))
               for i, job in enumerate(jobs)}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(("check", "dialect"), cases("Codex CLI"))
def test_codex_exec(check: str, dialect: str, codex_runs: Runs) -> None:
    run = codex_runs[check, dialect].result()
    done, sent, model = run.done, run.sent, SETUPS[check][1]
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert done.stdout.strip() == ANSWER, done.stdout[-2000:]
    assert all(r["path"] == "/v1/responses" and r["method"] == "POST" for r in sent), sent
    first = sent[0]["body"]
    assert (set(first), tool_types(first)) == (SENT_DEFAULT if model is None else SENT_UNKNOWN_MODEL)
    assert (first["stream"], first["store"], first["include"]) == (True, False, ["reasoning.encrypted_content"])
    if check == "exec_turn":
        assert len(sent) == 1
        assert any(i.get("type") == "additional_tools" for i in sent[0]["body"]["input"])
        return
    assert len(sent) == 2, [items(r) for r in sent]
    call, output = items(sent[1])[-2:]  # store: false: the whole history again, ending with the call and its output
    assert call["call_id"] == output["call_id"]
    if check == "code_mode_round_trip":
        assert (call["type"], call["namespace"], call["name"], call["input"]) == (
            "custom_tool_call", "functions", "exec", "example")
        assert output["type"] == "custom_tool_call_output"
        assert "example is not defined" in json.dumps(output["output"])  # Codex ran the JavaScript
    else:
        assert (call["type"], call["name"], json.loads(call["arguments"])) == (
            "function_call", "exec_command", {"cmd": "example"})
        assert output["type"] == "function_call_output"
        assert "example: command not found" in output["output"]  # Codex ran the command in bash


# A Codex turn on the embedded model: its own short prompt and base instructions (a long answer or Codex's ~22 kB
# instructions would cost CPU, not evidence), Codex's idle timer cut to IDLE_MS with no stream retries, and the
# gateway sending a keepalive event every PROGRESS_SECONDS.
EMBEDDED_PROMPT = "Say hello in one short sentence."
INSTRUCTIONS = "You are Codex, a coding agent. Answer briefly."
IDLE_MS = 2500  # Codex's stream_idle_timeout_ms here (its default 300,000); a retry would hide a timeout, so none
PROGRESS_SECONDS = 0.5


@pytest.mark.model
@pytest.mark.timeout(900)  # wall time on a loaded machine; the work is about a minute of CPU (one model thread)
def test_codex_turn_on_the_embedded_model(netns: str, tmp_path: Path) -> None:
    """``codex exec`` on the small embedded model in the default dialect: Codex's default request (its tools; about
    1,700 tokens for SmolLM2 with the short base instructions, 6,000 with its own) on llama.cpp with one thread,
    which reads it for several times IDLE_MS (measured: 16 s of CPU; 90 s of wall time on a loaded machine). The
    turn completes only because the gateway's keepalive events (progress_events.py) count as events to Codex, which
    the ``: keep-alive`` comments do not."""
    from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

    if not EmbeddedUpstream.available("small"):
        missing("the embedded model is not installed (`make install-model`)")
    port, home, work = PORT + 50, tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "instructions.md").write_text(INSTRUCTIONS)
    config = f'model_instructions_file = "{home / "instructions.md"}"\n' + codex_config(None, port)
    (home / "config.toml").write_text(config + f"stream_idle_timeout_ms = {IDLE_MS}\nstream_max_retries = 0\n")
    gateway = NamespacedGateway(netns, "platform", "embedded", tmp_path / "requests.jsonl", port,
                                ("--model-size=small", "--threads=1", f"--progress={PROGRESS_SECONDS}"))
    try:
        done = run_codex(netns, home, work, EMBEDDED_PROMPT, timeout=840)
        cpu = gateway.cpu_seconds()
    finally:
        gateway.stop()
    sent, timings = gateway.requests(), gateway.timings()
    print(f"codex on the embedded model: exit {done.returncode}, gateway CPU {cpu:.1f} s, {timings}")
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-3000:]}"
    assert sent and all(r["path"] == "/v1/responses" and r["method"] == "POST" for r in sent), sent
    assert (set(sent[0]["body"]), tool_types(sent[0]["body"])) == SENT_DEFAULT  # Codex's default request...
    assert INSTRUCTIONS in json.dumps(sent[0]["body"]["input"])  # ...with the short instructions
    assert len(timings) == len(sent), timings
    first, last = timings[0], timings[-1]
    # The model's first output came after Codex's idle timer would have fired: the keepalive events carried it.
    assert first["first_output_item"] * 1000 > IDLE_MS and first["keepalive_events"] >= 1, first
    answer = last["text"].strip()
    assert answer, timings  # the model answered text...
    assert done.stdout.strip() == answer, (done.stdout[-2000:], answer)  # ...and Codex printed that answer
