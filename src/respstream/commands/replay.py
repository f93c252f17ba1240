"""``respstream replay FILE|-``: assemble a captured SSE transcript (DESIGN §3, a stable contract).

Exit codes, first match wins: 2 bad input, 7 any violation (``--strict`` only), 6 truncated, 8 cancelled,
3 failed, 4 error, 5 incomplete, 0 completed. The file is read in chunks, so a huge transcript stays bounded in
memory (only the assembled answer is kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, BinaryIO, Final

from respstream.errors import BadInputError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.sequencer import DEFAULT_WINDOW
from respstream.protocol.stream import StreamCore

__all__ = ["CHUNK_SIZE", "EXIT_CODES", "add_stream_options", "exit_code", "make_core", "read_into", "register", "run"]

CHUNK_SIZE: Final = 256 * 1024
EXIT_CODES: Final[dict[str, int]] = {
    "bad_input": 2,
    "violations": 7,
    "truncated": 6,
    "cancelled": 8,
    "failed": 3,
    "error": 4,
    "incomplete": 5,
    "completed": 0,
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="assemble a captured Responses SSE transcript",
        description="Replay a captured /v1/responses SSE transcript: order, assemble and check it. Exit codes: "
        "2 bad input, 7 violations (--strict), 6 truncated, 8 cancelled, 3 failed, 4 error, 5 incomplete, "
        "0 completed.",
    )
    parser.add_argument("file", metavar="FILE", help="the transcript, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1)")
    parser.add_argument("--strict", action="store_true", help="exit 7 when any protocol violation was found")
    add_stream_options(parser)
    parser.set_defaults(func=run)


STARTING_AFTER_HELP: Final = (
    "the transcript is a resumed stream (GET ...?starting_after=N): numbering starts at N+1, no response.created is "
    "expected, and nothing that depends on events at or before N is judged; events numbered N or less count as "
    "already delivered (sequence.duplicate, dropped). -1 means the whole stream"
)
WINDOW_HELP: Final = (
    f"reorder window: how many early events may wait for a missing one (at least 1; default {DEFAULT_WINDOW}). When "
    "more wait, the missing range is reported as sequence.gap and the stream moves on"
)


def add_stream_options(parser: argparse.ArgumentParser) -> None:
    """``--starting-after N`` and ``--window W``, shared by ``replay`` and ``check``."""
    parser.add_argument("--starting-after", type=int, default=None, metavar="N", help=STARTING_AFTER_HELP)
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, metavar="W", help=WINDOW_HELP)


def read_into(core: StreamCore, path: str) -> None:
    """Feed the file (``-`` for stdin) to ``core`` in chunks and close it.

    Raises :class:`BadInputError` for bad input and for a file that cannot be read."""
    if path == "-":
        _pump(core, sys.stdin.buffer)
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below; open errors become one-line messages
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}", byte_offset=0) from None
    with handle:
        _pump(core, handle)


def _pump(core: StreamCore, handle: BinaryIO) -> None:
    read = handle.read
    feed = core.feed
    drain = core.events  # we only need the assembled result: drop released events so memory stays bounded
    while True:
        chunk = read(CHUNK_SIZE)
        if not chunk:
            break
        feed(chunk)
        drain()
    core.close()
    drain()


def exit_code(result: AssembledResponse, *, strict: bool) -> int:
    """The replay exit code for an assembled stream (DESIGN §3; bad input, 2, is decided before)."""
    if strict and result.violations:
        return EXIT_CODES["violations"]
    return EXIT_CODES[result.status]


def make_core(args: argparse.Namespace, dialect: str | None = None) -> StreamCore | None:
    """The protocol core for ``--starting-after`` / ``--window``; ``None`` (after one line on stderr) when an
    option is out of range."""
    problem = None
    if args.window < 1:
        problem = f"--window must be at least 1, not {args.window}"
    elif args.starting_after is not None and args.starting_after < -1:
        problem = f"--starting-after must be -1 or more, not {args.starting_after}"
    if problem is not None:
        print(f"respstream {args.command}: {problem}", file=sys.stderr)
        return None
    return StreamCore(starting_after=args.starting_after, window=args.window, dialect=dialect)


def run(args: argparse.Namespace) -> int:
    core = make_core(args)
    if core is None:
        return 2
    try:
        read_into(core, args.file)
    except BadInputError as exc:
        print(f"respstream replay: bad input: {exc}", file=sys.stderr)
        return 2
    result = core.result
    if args.json:
        payload = result.to_json()
        if core.violations_dropped:
            payload["violations_dropped"] = core.violations_dropped
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(summary(result, core.violations_dropped))
    return exit_code(result, strict=args.strict)


def summary(result: AssembledResponse, dropped: int = 0) -> str:
    """A short human-readable report of an assembled stream."""
    lines = [f"status:     {result.status}" + (f" ({result.terminal_event})" if result.terminal_event else "")]
    if result.response_id or result.model:
        lines.append(f"response:   {result.response_id or '-'}  model: {result.model or '-'}")
    if result.routing:
        lines.append("routing:    " + ", ".join(f"{k}={v}" for k, v in result.routing.items()))
    lines.append(f"events:     {result.events}  last sequence_number: {result.last_sequence_number}")
    if result.error:
        lines.append(f"error:      {result.error.get('code')}: {result.error.get('message')}")
    if result.incomplete_details:
        lines.append(f"incomplete: {json.dumps(result.incomplete_details)}")
    if result.usage:
        lines.append(f"usage:      {json.dumps(result.usage)}")
    for call in result.tool_calls:
        line = f"tool call:  {call['name']}({call['arguments']}) [{call['status']}] call_id={call['call_id']}"
        if call.get("output") is not None:
            line += f" -> {str(call['output'])[:200]}"
        lines.append(line)
    if result.refusal is not None:
        lines.append(f"refusal:    {result.refusal}")
    if result.streamed_text != result.output_text:
        note = "rewritten after streaming" if result.rewritten else "differs from the final text"
        lines.append(f"streamed:   ({note}) {result.streamed_text}")
    lines.append("text:")
    lines.append(result.output_text)
    if result.violations:
        lines.append(f"violations: {len(result.violations) + dropped}")
        lines.extend(f"  [{v.sequence_number}] {v.code}: {v.message}" for v in result.violations)
    else:
        lines.append("violations: none")
    return "\n".join(lines) + "\n"
