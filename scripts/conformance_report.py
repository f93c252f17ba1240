"""Regenerate docs/conformance.md: ``respstream check --url`` against llama.cpp's own ``/v1/responses`` and against
our gateway in front of the same model, side by side.

Usage (from the repository root)::

    .venv/bin/python scripts/conformance_report.py [--out docs/conformance.md] [--json-dir DIR] [--model-size SIZE]

How it works: it starts the embedded model exactly as the gateway's ``embedded`` upstream does (``--model-size``,
default the gateway's default, Qwen2.5-Coder-1.5B-Instruct; served by llama.cpp through the ``xllamacpp`` wheel
on a random loopback port). llama.cpp serves its own
``/v1/responses`` on that port; the gateway (``openai``, ``platform`` and ``openresponses`` dialects, each in a
uvicorn thread on another loopback port) uses the same llama.cpp server as its upstream, through Chat Completions and
through llama.cpp's own ``/v1/responses`` (the repair proxy). The live
suite runs against each endpoint in turn and the JSON reports become one Markdown page. Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import io
import json
import platform
import socket
import sys
import threading
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

import uvicorn

from respstream.conformance.live import run
from respstream.conformance.scenarios import SCENARIOS
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream
from respstream.server.upstream.model_catalog import DEFAULT_MODEL_SIZE, MODEL_SIZES, spec_for

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = "scripted:40?delay_ms=2&tool=get_weather"  # in-process scripted backend: no model, calls the tool
TIMEOUT = 300.0  # seconds per scenario: the machine may be shared

# Short reading of each code, for the "what differs" list (DESIGN §3 has the full definitions).
MEANING = {
    "sequence.missing": "events carry no `sequence_number`, so a client cannot detect gaps or resume",
    "sequence.gap": "a `sequence_number` was skipped",
    "sequence.duplicate": "a `sequence_number` came twice",
    "sequence.out_of_order": "events arrived out of `sequence_number` order",
    "envelope.missing_field": "an event lacks a field that locates or carries content (`output_index`, ...)",
    "envelope.missing_type": "an event has no `type`",
    "lifecycle.created_not_first": "the first event is not `response.created`",
    "lifecycle.no_terminal": "the stream ended without a terminal event",
    "lifecycle.terminal_not_last": "events came after the terminal event",
    "lifecycle.multiple_terminal": "more than one terminal event",
    "item.delta_before_added": "a delta arrived before its item/part was added",
    "item.delta_after_done": "an event for an item or part came after its `done`",
    "item.done_without_added": "an item was done without being added",
    "item.duplicate_added": "an item was added twice",
    "item.not_done": "an item was still open at `response.completed`",
    "item.index_mismatch": "`item_id` disagrees with the item at `output_index`",
    "text.done_mismatch": "a `*.done` text differs from its deltas",
    "completed.output_mismatch": "`response.completed` output differs from the streamed items",
}


class ServerThread:
    """The gateway app under uvicorn on a random loopback port, in a daemon thread."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def check(url: str, dialect: str) -> dict[str, Any]:
    """``respstream check --url URL --json --dialect D``, in-process; progress goes to our stderr."""
    out = io.StringIO()
    args = types.SimpleNamespace(url=url, json=True, dialect=dialect, starting_after=None, timeout=TIMEOUT)
    code = run(args, stdout=out, stderr=sys.stderr)
    if code == 2:
        raise SystemExit(f"check --url {url} could not run (exit 2)")
    report: dict[str, Any] = json.loads(out.getvalue())
    report["exit_code"] = code
    return report


def collect(model_size: str) -> list[tuple[str, dict[str, Any]]]:
    upstream = EmbeddedUpstream(n_parallel=2, model_size=model_size)
    asyncio.run(upstream.start())
    assert upstream.address is not None
    llama = f"{upstream.address}/v1"
    print(f"llama.cpp (xllamacpp) listening on {upstream.address}", file=sys.stderr)
    reports: list[tuple[str, dict[str, Any]]] = []
    try:
        print("\n== llama.cpp /v1/responses (checked with the openai dialect's rules)", file=sys.stderr)
        reports.append(("llama.cpp `/v1/responses`", check(llama, "openai")))
        for dialect in ("openai", "platform", "openresponses"):
            app = create_app(Config(dialect=dialect, upstreams=[f"chat+{llama}"], store="memory"))
            with ServerThread(app) as gateway:
                print(f"\n== respstream gateway, {dialect} dialect, upstream chat+{llama}", file=sys.stderr)
                reports.append((f"respstream gateway (`{dialect}`)", check(gateway.base_url, dialect)))
        # The repair proxy: the same gateway reading llama.cpp's own /v1/responses (issue 18).
        for dialect in ("openai", "platform"):
            app = create_app(Config(dialect=dialect, upstreams=[f"responses+{llama}"], store="memory"))
            with ServerThread(app) as gateway:
                print(f"\n== respstream gateway, {dialect} dialect, upstream responses+{llama}", file=sys.stderr)
                reports.append((f"gateway (`{dialect}`) over llama.cpp `/v1/responses`",
                                check(gateway.base_url, dialect)))
    finally:
        asyncio.run(upstream.aclose())
    # The same gateway without a model: the scripted upstream always calls the client tool, so the tool round trip
    # (which a small model rarely does) is exercised too. Labelled as simulated everywhere it appears.
    app = create_app(Config(dialect="openai", upstreams=[SIMULATED], store="memory"))
    with ServerThread(app) as gateway:
        print(f"\n== respstream gateway, openai dialect, SIMULATED upstream {SIMULATED}", file=sys.stderr)
        reports.append(("gateway (`openai`), SIMULATED upstream", check(gateway.base_url, "openai")))
    return reports


def _cell(scenario: dict[str, Any]) -> str:
    result = str(scenario["result"])
    count = len(scenario["violations"])
    return f"{result} ({count})" if count else result


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(reports: list[tuple[str, dict[str, Any]]], model_size: str = DEFAULT_MODEL_SIZE) -> str:
    model = spec_for(model_size).title
    names = [name for name, _ in reports]
    by_scenario = [{s["name"]: s for s in report["scenarios"]} for _, report in reports]
    lines = [
        "# Conformance: llama.cpp's own `/v1/responses` vs the respstream gateway",
        "",
        "Regenerate with `.venv/bin/python scripts/conformance_report.py` (this page is its output; do not edit by "
        f"hand). It starts {model} (`--model-size {model_size}`), with llama.cpp (the `xllamacpp` wheel) on "
        "loopback, exactly as the "
        "gateway's `embedded` upstream does, then runs `respstream check --url` against llama.cpp's own "
        "`/v1/responses` and against our gateway using that same llama.cpp server as its upstream: through its Chat "
        "Completions API (`chat+http://…`), and through llama.cpp's own `/v1/responses` (`responses+http://…`: the "
        "gateway as a repair proxy, see docs/configuration.md#native-responses-upstreams).",
        "",
        f"Generated {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} on {platform.machine()} "
        f"({_cores()} cores) with Python {platform.python_version()}, xllamacpp {_version('xllamacpp')}, "
        f"respstream {_version('respstream')}.",
        "",
        "Results: `passed` (the stream ran and the rules found nothing), `violations` (it ran; the rules found "
        "protocol violations), `unsupported` (the server clearly does not offer the feature: a 4xx refusal, no "
        "background mode, no tool call), `failed` (the server broke the contract: 5xx, hang, wrong status, no "
        "terminal event). The number in brackets counts violations. A scenario the *model* cannot do (it answers "
        "in text instead of calling the tool) shows up as `unsupported` on both sides. The last column is the same "
        "gateway with the "
        f"SIMULATED in-process scripted upstream (`{SIMULATED}`, no model): it always calls the client tool, so it "
        "shows the protocol side of the tool round trip whatever the model does.",
        "",
        "## Scenario results",
        "",
        "| scenario | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for scenario in SCENARIOS:
        cells = [_cell(results[scenario]) if scenario in results else "-" for results in by_scenario]
        lines.append(f"| `{scenario}` | " + " | ".join(cells) + " |")
    verdicts = ["ok (exit 0)" if report["ok"] else f"not ok (exit {report['exit_code']})" for _, report in reports]
    lines.append("| **verdict** | " + " | ".join(verdicts) + " |")
    lines += ["", "## Violations by code (all streams of all scenarios)", ""]
    counts = [Counter(v["code"] for s in report["scenarios"] for v in s["violations"]) for _, report in reports]
    codes = sorted(set().union(*counts))
    if codes:
        lines += ["| code | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        lines += [f"| `{code}` | " + " | ".join(str(c.get(code, 0)) for c in counts) + " |" for code in codes]
    else:
        lines.append("None on any endpoint.")
    lines += ["", "## What llama.cpp does differently", ""]
    lines += _differences(reports) or ["Nothing the suite can see."]
    lines += ["", "## Details", ""]
    for (name, _), results in zip(reports, by_scenario, strict=True):
        lines += [f"### {name}", "", "| scenario | result | detail |", "|---|---|---|"]
        for scenario in SCENARIOS:
            if scenario in results:
                s = results[scenario]
                lines.append(f"| `{scenario}` | {s['result']} | {_escape(s['detail'])} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _differences(reports: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One bullet per violation code llama.cpp has and the gateway does not, with a first example."""
    (_, llama), *gateways = reports
    ours = {v["code"] for _, report in gateways for s in report["scenarios"] for v in s["violations"]}
    examples: dict[str, list[str]] = {}
    for s in llama["scenarios"]:
        for v in s["violations"]:
            # Drop the "stream label: " prefix so the same finding in several streams is listed once.
            message = str(v["message"]).split(": ", 1)[-1]
            seen = examples.setdefault(v["code"], [])
            if message not in seen:
                seen.append(message)
    bullets = []
    for code, messages in sorted(examples.items()):
        if code in ours:
            continue
        meaning = MEANING.get(code, code)
        found = "; ".join(_escape(m) for m in messages[:4])
        bullets.append(f"- `{code}`: {meaning}. Found: {found}")
    ours_results = {s["name"]: s["result"] for _, report in gateways[:1] for s in report["scenarios"]}
    for s in llama["scenarios"]:
        if s["result"] in ("unsupported", "failed") and ours_results.get(s["name"]) == "passed":
            bullets.append(f"- `{s['name']}`: {s['result']} on llama.cpp ({_escape(s['detail'])}); passed on ours.")
    return bullets


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "conformance.md")
    parser.add_argument("--json-dir", type=Path, default=None, help="also write each JSON report here")
    parser.add_argument("--model-size", choices=list(MODEL_SIZES), default=DEFAULT_MODEL_SIZE,
                        help=f"the embedded model (default {DEFAULT_MODEL_SIZE}, the gateway's default)")
    options = parser.parse_args()
    reports = collect(options.model_size)
    if options.json_dir is not None:
        options.json_dir.mkdir(parents=True, exist_ok=True)
        for index, (name, report) in enumerate(reports):
            (options.json_dir / f"report-{index}.json").write_text(json.dumps({"target": name, **report}, indent=1))
    options.out.parent.mkdir(parents=True, exist_ok=True)
    # Keep the compliance-suite section that scripts/compliance_table.py writes between its markers.
    old = options.out.read_text(encoding="utf-8") if options.out.is_file() else ""
    start, end = "<!-- openresponses-suite:start -->", "<!-- openresponses-suite:end -->"
    kept = ("\n" + start + old.split(start, 1)[1].split(end, 1)[0] + end + "\n") if start in old and end in old else ""
    options.out.write_text(render(reports, options.model_size) + kept, encoding="utf-8")
    print(f"\nwrote {options.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
