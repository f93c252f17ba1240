"""The board's protocol-correctness row: the public Open Responses compliance suite (17 tests, spec 2026-04-24;
/work/shared/tools/openresponses-compliance, as scripts/compliance.sh runs it) against each system on the board that
exposes ``/v1/responses``, every one in front of a SIMULATED upstream that can answer the suite's requests.

- ``respstream`` (and ``respstream-granian``): the Chat Completions bridge in front of benchmarks/suite_upstream.py
  (SIMULATED: fixed text, a call to the first offered function tool), in the ``openresponses`` dialect (the one the
  suite speaks; the default ``platform`` dialect is the EU GPT seed's wire format, not the spec's), with the
  upstream's image input declared (it accepts images).
- ``litellm``: its Responses -> Chat Completions bridge (the board's configuration) in front of the same SIMULATED
  Chat Completions upstream.
- ``respstream-native`` and ``portkey``: both forward a Responses request to a Responses upstream, so they sit in
  front of the ``respstream`` instance above (itself in front of the SIMULATED upstream). Their score is what their
  forwarding keeps of a stream that scores 17/17 directly. Portkey's routing headers go in ``x-portkey-config`` (the
  suite sends one header of our choosing: ``--auth-header``), with ``custom_host`` pointing at that instance.
- ``floor``: n/a, it is not a gateway (it writes one pre-encoded answer whatever the request says).

A system that cannot be started, or a suite that is not there, gets ``None`` with the reason, never a score.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from board_systems import LITELLM_KEY, PORTKEY_KEY, SYSTEMS, start_for_suite
from server_throughput import Proc

__all__ = ["SUITE", "compliance_scores", "suite_dir"]

ROOT = Path(__file__).resolve().parent.parent
SUITE = Path(os.environ.get("OPENRESPONSES_SUITE", ROOT.parent / "shared" / "tools" / "openresponses-compliance"))
MODEL = "fake-model"
# The suite's 17 tests at its pinned commit, by transport.
HTTP_TESTS = ("basic-response", "assistant-phase", "response-output-phase-schema", "streaming-response",
              "system-prompt", "tool-calling", "image-input", "multi-turn", "compact-response",
              "compact-missing-model")
WEBSOCKET_TESTS = ("websocket-response", "websocket-sequential-responses", "websocket-continuation",
                   "websocket-reconnect-store-false-recovery", "websocket-previous-response-not-found",
                   "websocket-failed-continuation-evicts-cache", "websocket-compact-new-chain")
RESPSTREAM_SUITE_CONFIG = 'dialect = "openresponses"\n[models.input_modalities]\n"fake-model" = ["text", "image"]\n'
HOW = {
    "respstream": "chat bridge, `openresponses` dialect, SIMULATED Chat Completions upstream",
    "respstream-granian": "as respstream, served by Granian (`--no-ws`)",
    "respstream-native": "native Responses upstream = the respstream instance above",
    "litellm": "Responses -> Chat Completions bridge, the same SIMULATED Chat Completions upstream",
    "portkey": "forwards to the respstream instance above (`x-portkey-config`: provider openai, custom_host)",
}


def suite_dir() -> Path | None:
    return SUITE if (SUITE / "run").exists() else None


def _start_suite_upstream(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = tmp / "suite-upstream.port"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("suite_upstream.py")), "--port-file",
                             str(port_file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the SIMULATED suite upstream exited at start")
        if port_file.exists() and port_file.read_text():
            import urllib.request

            url = f"http://127.0.0.1:{port_file.read_text()}/v1"
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=1):
                    return proc, url
            except OSError:
                pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the SIMULATED suite upstream did not answer within 30 s")


def run_suite(base_v1: str, auth: list[str], timeout: float, tests: tuple[str, ...] = ()) -> dict[str, Any]:
    """One run of the suite (``tests``: only these) against ``base_v1``: passed / total and the failed tests with
    their first error."""
    suite = suite_dir()
    assert suite is not None
    argv = [str(suite / "run"), base_v1, "--model", MODEL, "--json", *auth]
    if tests:
        argv += ["--filter", ",".join(tests)]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"score": None, "reason": f"the suite did not finish within {timeout:.0f} s"}
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return {"score": None, "reason": "the suite printed no JSON report: "
                + done.stderr.decode(errors="replace").strip()[-300:]}
    summary = report["summary"]
    failed = {r["id"]: "; ".join(str(e) for e in r.get("errors") or [])[:160]
              for r in report["results"] if r["status"] != "passed"}
    return {"score": f"{summary['passed']}/{summary['total']}", "passed": summary["passed"],
            "total": summary["total"], "failed": failed}


def compliance_scores(names: list[str], tmp: Path, *, timeout: float = 300) -> dict[str, dict[str, Any]]:
    """The suite's score per system in ``names`` (each started fresh, then stopped)."""
    if suite_dir() is None:
        why = f"the Open Responses suite is not at {SUITE} (set OPENRESPONSES_SUITE)"
        return {name: {"score": None, "reason": why} for name in names}
    out: dict[str, dict[str, Any]] = {}
    upstream_proc, upstream_v1 = _start_suite_upstream(tmp)
    procs: list[Proc] = []
    try:
        base = start_for_suite(SYSTEMS["respstream"], upstream_v1, tmp, respstream_config=RESPSTREAM_SUITE_CONFIG)
        procs.append(base)
        base_v1 = base.url.removesuffix("/responses")
        for name in names:
            print(f"[suite] {name}", flush=True)
            if name == "floor":
                out[name] = {"score": None, "reason": "not a gateway: it writes one pre-encoded answer to any request"}
                continue
            try:
                out[name] = {"how": HOW[name], **_score(name, base, base_v1, upstream_v1, tmp, timeout)}
            except (FileNotFoundError, RuntimeError) as exc:
                out[name] = {"score": None, "reason": str(exc).strip().splitlines()[-1][:300], "how": HOW[name]}
            print(f"  {json.dumps(out[name])[:300]}", flush=True)
    finally:
        for proc in procs:
            proc.stop()
        upstream_proc.terminate()
        upstream_proc.wait(timeout=10)
    return out


def _score(name: str, base: Proc, base_v1: str, upstream_v1: str, tmp: Path, timeout: float) -> dict[str, Any]:
    """The suite in two passes, HTTP tests then WebSocket tests, each against a fresh process: a system whose process
    exits on the WebSocket tests (Portkey does) still has its HTTP tests scored, whatever order the suite runs in."""
    if name == "respstream":
        return run_suite(base_v1, [], timeout)
    system = SYSTEMS[name]
    headers: dict[str, str] = {}
    auth: list[str] = []
    if name == "portkey":
        upstream = base_v1
        config = json.dumps({"provider": "openai", "api_key": PORTKEY_KEY, "custom_host": base_v1})
        headers = {"x-portkey-config": config}
        auth = ["--auth-header", "x-portkey-config", "--no-bearer", "--api-key", config]
    elif name == "litellm":
        upstream = upstream_v1
        headers = {"authorization": f"Bearer {LITELLM_KEY}"}
        auth = ["--api-key", LITELLM_KEY]
    else:  # respstream-native in front of the base instance; respstream-granian in front of the upstream
        upstream = base_v1 if system.upstream_api == "responses" else upstream_v1
    out: dict[str, Any] = {"passed": 0, "total": 0, "failed": {}, "exited": []}
    for part, tests in (("HTTP", HTTP_TESTS), ("WebSocket", WEBSOCKET_TESTS)):
        proc = start_for_suite(system, upstream, tmp, respstream_config=RESPSTREAM_SUITE_CONFIG)
        try:
            _answers(proc.url, headers)
            result = run_suite(proc.url.removesuffix("/responses"), auth, timeout, tests)
            if proc.proc.poll() is not None:
                out["exited"].append(f"its process exited during the {part} tests (code {proc.proc.returncode})")
        finally:
            proc.stop()
        if result["score"] is None:
            return result
        out["passed"] += result["passed"]
        out["total"] += result["total"]
        out["failed"].update(result["failed"])
    out["score"] = f"{out['passed']}/{out['total']}"
    return out


def _answers(url: str, headers: dict[str, str], wait: float = 60) -> None:
    """Wait until ``url`` answers a plain request with 200: a listening port is not enough (Portkey resets the
    first connections for a moment after it listens, and the suite would count those as failures)."""
    import urllib.error
    import urllib.request

    body = json.dumps({"model": MODEL, "input": "hello"}).encode()
    deadline = time.monotonic() + wait
    last = ""
    while time.monotonic() < deadline:
        request = urllib.request.Request(url, body, {"content-type": "application/json", **headers})
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    return
                last = f"status {answer.status}"
        except (OSError, urllib.error.HTTPError) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise RuntimeError(f"it did not answer a plain request with 200 within {wait:.0f} s ({last[:160]})")
