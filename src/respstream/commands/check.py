"""``respstream check FILE|-|--url URL``: report protocol violations (DESIGN §3, a stable contract).

On a file: exit 0 no violation, 1 some, 2 bad input. ``--url`` runs the live conformance suite, which lives in
``respstream.conformance.live`` (``run(args) -> int``) and is imported only when asked for.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from respstream.commands.replay import add_stream_options, make_core, read_into
from respstream.errors import BadInputError
from respstream.protocol.stream import DIALECTS

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="report protocol violations in a transcript or a live endpoint",
        description="Check a captured /v1/responses SSE transcript (or, with --url, a live endpoint) against "
        "the protocol rules. Exit 0 no violation, 1 some, 2 bad input or unreachable endpoint.",
    )
    parser.add_argument("file", metavar="FILE", nargs="?", help="the transcript, or - for stdin")
    parser.add_argument("--url", metavar="URL", help="run the live conformance suite against this base URL")
    parser.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1)")
    parser.add_argument("--dialect", choices=DIALECTS, default=None,
                        help="also check the SSE event names and envelope of this dialect (openresponses: also "
                             "no id: lines, data: [DONE], prefixed extensions, every event and Response object "
                             "against the spec's schemas)")
    live = parser.add_argument_group("live suite (--url)")
    live.add_argument("--api-key", metavar="KEY", help="bearer key (default: $RESPSTREAM_API_KEY or $OPENAI_API_KEY)")
    live.add_argument("--model", metavar="M", help="model to request (default: the server's default)")
    live.add_argument("--timeout", metavar="SECONDS", type=float,
                      help="deadline per scenario (default 60); raise it for a slow or busy server (a loaded CPU "
                           "model): a scenario that runs out of time is reported as timed out with this hint")
    live.add_argument("--scenario", metavar="NAME", action="append",
                      help="run only these scenarios (repeatable or comma-separated)")
    add_stream_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.url is not None:
        if args.file is not None:
            print("respstream check: give either FILE or --url, not both", file=sys.stderr)
            return 2
        return _live(args)
    if args.file is None:
        print("respstream check: give a FILE (or - for stdin) or --url URL", file=sys.stderr)
        return 2
    core = make_core(args, dialect=args.dialect)
    if core is None:
        return 2
    try:
        read_into(core, args.file)
    except BadInputError as exc:
        print(f"respstream check: bad input: {exc}", file=sys.stderr)
        return 2
    violations = core.violations
    if args.json:
        payload: dict[str, Any] = {
            "schema_version": 1,
            "ok": not violations,
            "status": core.status,
            "events": core.assembler.events,
            "violations": [v.to_json() for v in violations],
        }
        if core.violations_dropped:
            payload["violations_dropped"] = core.violations_dropped
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        total = len(violations) + core.violations_dropped
        for v in violations:
            print(f"[{v.sequence_number}] {v.code}: {v.message}")
        verdict = "ok: no violations" if not violations else f"{total} violation(s)"
        print(f"{verdict} ({core.assembler.events} events, status {core.status})")
    return 1 if violations else 0


def _live(args: argparse.Namespace) -> int:
    try:
        live = importlib.import_module("respstream.conformance.live")
    except ModuleNotFoundError as exc:
        if exc.name is None or not "respstream.conformance.live".startswith(exc.name):
            raise
        print("respstream check --url: the live conformance suite (respstream.conformance.live) is not "
              "available in this build", file=sys.stderr)
        return 2
    return int(live.run(args))
