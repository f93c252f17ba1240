"""Launching the Codex CLI against the gateway, for every Codex case (tests/clients/test_codex.py, its WebSocket twin
test_codex_websocket.py, tests/providers/anthropic/test_codex_cli.py): the network namespace (loopback only), the
gateway process in it (codex_gateway.py: the real app, SIMULATED scripted or embedded upstream, recording every
request), Codex's ``config.toml`` and the ``codex exec`` run itself.

Needs root for ``ip netns`` (CI has it): a missing capability fails under CI=true and skips otherwise (``missing``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import respstream

from .conftest import missing
from .matrix import CHECKS, DIALECTS, PROMPT, scripted

__all__ = ["CODEX", "CODEX_MODEL", "EMBEDDED_PROMPT", "IDLE_MS", "INSTRUCTIONS", "PROGRESS_SECONDS", "SETUPS",
           "CodexRun", "EmbeddedTurn", "NamespacedGateway", "Runs", "case_runs", "codex_config", "embedded_turn",
           "netns", "run_codex"]

HERE = Path(__file__).parent
CODEX = HERE / "node" / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
CODEX_MODEL = "gpt-6.1-sol"  # the pinned Codex's default model (what `codex exec` prints as "model:")
# check -> (the tool the scripted upstream calls first, the model Codex is configured with; None: its default)
SETUPS: dict[str, tuple[str, str | None]] = {
    "exec_turn": ("", None),
    "code_mode_round_trip": ("functions__exec", None),
    "shell_round_trip": ("exec_command", "auto"),
}

# A Codex turn on the embedded model: its own short prompt and base instructions (a long answer or Codex's ~22 kB
# instructions would cost CPU, not evidence), Codex's idle timer cut to IDLE_MS with no stream retries, and the
# gateway sending a keepalive event every PROGRESS_SECONDS.
EMBEDDED_PROMPT = "Say hello in one short sentence."
INSTRUCTIONS = "You are Codex, a coding agent. Answer briefly."
IDLE_MS = 2500  # Codex's stream_idle_timeout_ms here (its default 300,000); a retry would hide a timeout, so none
PROGRESS_SECONDS = 0.5

ConfigFor = Callable[[str | None, int], str]  # (the model Codex is configured with, the gateway's port) -> its TOML


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


def _codex_folders(folder: Path) -> tuple[Path, Path]:
    """Codex's home and its project folder, made under ``folder``."""
    home, work = folder / "codex-home", folder / "work"
    home.mkdir()
    work.mkdir()
    return home, work


@dataclass
class CodexRun:
    done: subprocess.CompletedProcess[str]
    sent: list[dict[str, Any]]  # what the gateway recorded


Runs = dict[tuple[str, str], Future[CodexRun]]  # (check, dialect) -> its run


def _run_case(netns: str, config_for: ConfigFor, check: str, dialect: str, port: int, folder: Path) -> CodexRun:
    """One `codex exec` against its own gateway (its check's upstream) on ``port`` in the namespace."""
    tool, model = SETUPS[check]
    home, work = _codex_folders(folder)
    (home / "config.toml").write_text(config_for(model, port))
    gateway = NamespacedGateway(netns, dialect, scripted(tool), folder / "requests.jsonl", port)
    try:
        return CodexRun(run_codex(netns, home, work), gateway.requests())
    finally:
        gateway.stop()


@contextmanager
def case_runs(netns: str, client: str, first_port: int, folders: pytest.TempPathFactory,
              config_for: ConfigFor = codex_config) -> Iterator[Runs]:
    """Every case of ``client`` in the matrix run, three at a time, in the cases' order (each test waits for its
    own; case i on ``first_port + i``): a run is mostly waiting (Codex's own offline start-up retries take about
    5 s of each), so this keeps the matrix's wall time down without loading the cores."""
    jobs = [(check, dialect) for check in CHECKS[client] for dialect in DIALECTS]
    pool = ThreadPoolExecutor(max_workers=3)
    try:
        yield {job: pool.submit(_run_case, netns, config_for, *job, first_port + i, folders.mktemp("codex"))
               for i, job in enumerate(jobs)}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class EmbeddedTurn:
    done: subprocess.CompletedProcess[str]
    sent: list[dict[str, Any]]  # what the gateway recorded
    timings: list[dict[str, Any]]  # its timing line per response
    cpu_seconds: float  # the gateway's CPU time, read when Codex had finished


def embedded_turn(netns: str, folder: Path, port: int, upstream: str = "embedded",
                  config_for: ConfigFor = codex_config) -> EmbeddedTurn:
    """One ``codex exec`` of EMBEDDED_PROMPT on the small embedded model (``upstream``, one llama.cpp thread) in the
    platform dialect: Codex with the short INSTRUCTIONS and its idle timer cut to IDLE_MS with no retries, the
    gateway sending a keepalive event every PROGRESS_SECONDS. Skips (fails under CI) without the model."""
    from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

    if not EmbeddedUpstream.available("small"):
        missing("the embedded model is not installed (`make install-model`)")
    home, work = _codex_folders(folder)
    (home / "instructions.md").write_text(INSTRUCTIONS)
    config = f'model_instructions_file = "{home / "instructions.md"}"\n' + config_for(None, port)
    # (stream_idle_timeout_ms and stream_max_retries are provider settings: they go in the provider's table)
    (home / "config.toml").write_text(config + f"stream_idle_timeout_ms = {IDLE_MS}\nstream_max_retries = 0\n")
    gateway = NamespacedGateway(netns, "platform", upstream, folder / "requests.jsonl", port,
                                ("--model-size=small", "--threads=1", f"--progress={PROGRESS_SECONDS}"))
    try:
        done = run_codex(netns, home, work, EMBEDDED_PROMPT, timeout=840)
        cpu = gateway.cpu_seconds()
    finally:
        gateway.stop()
    return EmbeddedTurn(done, gateway.requests(), gateway.timings(), cpu)
