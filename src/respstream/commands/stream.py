"""``respstream stream PROMPT``: stream one response live to the terminal (DESIGN §3, a stable contract).

Exit codes are ``replay``'s: 0 completed, 3 failed, 4 error, 5 incomplete, 6 truncated, 8 cancelled, and 2 for bad
input, an unreachable server or an HTTP error before streaming (one line on stderr, never a traceback); 130 on
Ctrl-C. ``--json`` prints the ``replay --json`` object; ``--events`` a compact timeline. Works unchanged against
OpenAI (``--url https://api.openai.com/v1`` with ``OPENAI_API_KEY``) and the seed platform.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Final, TextIO

from respstream.client.sync import Client, ResponseStream
from respstream.client.terminal import LiveRenderer, Spinner, Style, Timeline
from respstream.errors import APIStatusError, BadInputError, RespstreamError, StreamTruncated
from respstream.protocol.assembler import AssembledResponse

__all__ = ["DEFAULT_URL", "EXIT_CODES", "build_request", "register", "run"]

DEFAULT_URL: Final = "http://127.0.0.1:8080/v1"
# The same table as `respstream replay` (DESIGN §3).
EXIT_CODES: Final[dict[str, int]] = {
    "completed": 0,
    "failed": 3,
    "error": 4,
    "incomplete": 5,
    "truncated": 6,
    "cancelled": 8,
}
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stream",
        help="stream one response live to the terminal",
        description="POST /v1/responses with stream: true and show the answer as it is generated: text, tool "
        "calls, routing, rewrites, usage and timing. Exit codes as `replay`: 0 completed, 3 failed, 4 error, "
        "5 incomplete, 6 truncated, 8 cancelled, 2 bad input / unreachable / HTTP error.",
    )
    parser.add_argument("prompt", metavar="PROMPT", help="the input text, or - to read it from stdin")
    parser.add_argument("--url", default=None,
                        help=f"base URL (default: $RESPSTREAM_BASE_URL or {DEFAULT_URL})")
    parser.add_argument("--model", default=None, help="model id (the gateway routes 'auto' when omitted)")
    parser.add_argument("--background", action="store_true",
                        help="background response: a dropped connection resumes with starting_after")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--json", action="store_true", help="print the assembled response as JSON (as replay --json)")
    view.add_argument("--events", action="store_true", help="print a compact timeline, one line per event")
    parser.add_argument("--ws", action="store_true",
                        help="use WebSocket mode (one socket to /v1/responses) instead of an SSE POST")
    parser.add_argument("--instructions", default=None, help="system instructions")
    parser.add_argument("--tool", action="append", default=[], metavar="NAME",
                        help="enable a server tool by type (web_search, calculator, ...); repeatable")
    parser.add_argument("--max-output-tokens", type=int, default=None, metavar="N")
    parser.add_argument("--api-key", default=None,
                        help="API key (default: $RESPSTREAM_API_KEY or $OPENAI_API_KEY)")
    parser.add_argument("--idle-timeout", type=float, default=60.0, metavar="S",
                        help="give up (or resume, with --background) after S seconds without data (default 60)")
    parser.set_defaults(func=run)


def build_request(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    """The POST body for the parsed arguments (``stream: true`` is added by the client)."""
    request: dict[str, Any] = {"input": prompt}
    if args.model:
        request["model"] = args.model
    if args.instructions:
        request["instructions"] = args.instructions
    if args.tool:
        request["tools"] = [{"type": name} for name in args.tool]
    if args.max_output_tokens is not None:
        request["max_output_tokens"] = args.max_output_tokens
    if args.background:
        request["background"] = True
    return request


def _fail(message: str) -> int:
    print(f"respstream stream: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    if not (0 < args.idle_timeout < float("inf")):  # NaN fails this too
        return _fail(f"--idle-timeout must be a positive number of seconds, not {args.idle_timeout:g}")
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        return _fail("the prompt is empty")
    url = args.url or os.environ.get("RESPSTREAM_BASE_URL") or DEFAULT_URL
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    style = Style(color)
    meta: TextIO = sys.stdout if sys.stdout.isatty() else sys.stderr
    spinner = Spinner(sys.stderr, enabled=sys.stderr.isatty() and not args.json and not args.events)
    renderer = LiveRenderer(sys.stdout, meta, style=style, spinner=spinner)
    timeline = Timeline(sys.stdout, style=style) if args.events else None
    result: AssembledResponse | None = None
    error: RespstreamError | None = None
    stream: ResponseStream | None = None
    with Client(url, args.api_key, idle_timeout=args.idle_timeout) as client:
        try:
            spinner.start()
            if args.ws:
                result, error = _over_websocket(client, build_request(args, prompt), renderer, timeline, args.json)
                return _report(args, renderer, result, error)
            stream = client.stream(**build_request(args, prompt))
            with stream:
                if not args.json and timeline is None:
                    stream.on_tool_call(renderer.tool_call)
                for event in stream:
                    if timeline is not None:
                        timeline.event(event)
                    elif not args.json:
                        renderer.event(event)
                try:
                    result = stream.result()
                except (BadInputError, APIStatusError):
                    raise
                except RespstreamError as exc:
                    error = exc
                    result = getattr(exc, "response", None) or stream.snapshot()
        except KeyboardInterrupt:
            spinner.stop()
            note = "interrupted"
            if args.background and stream is not None and stream.response_id:
                # A background response runs on: say how to pick it up again.
                note += (f"; background response {stream.response_id} continues (resume after sequence number "
                         f"{stream.last_sequence_number})")
            sys.stderr.write(f"\n{note}\n")
            return EXIT_INTERRUPTED
        except (BadInputError, APIStatusError) as exc:
            spinner.stop()
            return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except StreamTruncated as exc:  # raised by iteration: a foreground stream dropped
            spinner.stop()
            error, result = exc, exc.partial
        except RespstreamError as exc:  # unreachable server, timeouts before the first byte
            spinner.stop()
            return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        finally:
            spinner.stop()
    return _report(args, renderer, result, error)


def _over_websocket(client: Client, request: dict[str, Any], renderer: LiveRenderer, timeline: Timeline | None,
                    quiet: bool) -> tuple[AssembledResponse | None, RespstreamError | None]:
    """``--ws``: the same rendering, the events read from one WebSocket turn. Raises what ``connect()`` raises."""
    with client.connect() as conn:
        events = conn.stream(**request)
        try:
            for event in events:
                if timeline is not None:
                    timeline.event(event)
                elif not quiet:
                    renderer.event(event)
        except StreamTruncated as exc:
            return exc.partial, exc
        try:
            return conn.last.result(), None
        except (BadInputError, APIStatusError):
            raise
        except RespstreamError as exc:
            return getattr(exc, "response", None) or conn.last.core.result, exc


def _report(
    args: argparse.Namespace, renderer: LiveRenderer, result: AssembledResponse | None, error: RespstreamError | None
) -> int:
    if result is None:
        return _fail(str(error) if error else "no response")
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
        sys.stdout.flush()
    elif args.events:
        sys.stderr.write(renderer.stats(result) + "\n")
        if error is not None:
            sys.stderr.write(f"{result.status}: {error}\n")
    else:
        renderer.finish(result, error)
    return EXIT_CODES.get(result.status, EXIT_USAGE)
